//! The model requests of the protocols, built from a task: the trusted model's edit and
//! proposal, the untrusted model's samples; and a task as it would be with another call, for
//! the monitor to score a sample.

use airlock_contract::v1;
use airlock_records::monitor::NoteCall;
use serde_json::{Value, json};

use crate::prompt::{self, Limits, TaskError};
use crate::provider::{CallRequest, Settings, Tool, ToolChoice};

/// Inspect names models `<provider>/<model>`; these providers add a service in between
/// (`openai-api/<service>/<model>`).
const TWO_PART_PREFIXES: &[&str] = &["openai-api"];

/// The approval body of `task`, which a protocol acts on.
fn approval(task: &v1::StepTask) -> Result<&v1::ApprovalRequest, TaskError> {
    match task.request.as_ref().and_then(|r| r.body.as_ref()) {
        Some(v1::request::Body::Approval(approval)) => Ok(approval),
        _ => Err(TaskError("control protocols act on approval requests only".into())),
    }
}

fn original(approval: &v1::ApprovalRequest) -> Result<&v1::ToolCall, TaskError> {
    approval.call.as_ref().ok_or_else(|| TaskError("the request has no call".into()))
}

/// The call of `task` as a note shows it (arguments that are not a JSON object show as
/// none: the runner has flagged them with a parse error).
pub fn original_call(task: &v1::StepTask) -> Result<NoteCall, TaskError> {
    let call = original(approval(task)?)?;
    let arguments = match serde_json::from_str::<Value>(&call.arguments_json) {
        Ok(Value::Object(arguments)) => arguments,
        _ => serde_json::Map::new(),
    };
    Ok(NoteCall { function: call.function.clone(), arguments })
}

/// `trusted_edit`: the edit prompt, with the call's tool as the only one, forced.
pub fn edit(task: &v1::StepTask, limits: Limits, model: &str) -> Result<CallRequest, TaskError> {
    let approval = approval(task)?;
    let call = original(approval)?;
    let prompt = prompt::edit(task, limits)?;
    let message = |role: &str, text: String| v1::ChatMessage { role: role.into(), text, ..Default::default() };
    let tools = tools(approval);
    let tool = tools.into_iter().find(|t| t.name == call.function).unwrap_or_else(|| any_arguments(&call.function));
    Ok(CallRequest {
        model: model.to_owned(),
        messages: vec![message("system", prompt.system), message("user", prompt.user)],
        tools: vec![tool],
        choice: ToolChoice::Function(call.function.clone()),
        settings: Settings::default(),
        tag: None,
    })
}

/// `defer_to_trusted`: the conversation up to the call, with the tools the untrusted model was
/// offered (the call's own tool alone when the request does not say), a call required.
pub fn defer(task: &v1::StepTask, model: &str) -> Result<CallRequest, TaskError> {
    let approval = approval(task)?;
    let call = original(approval)?;
    let mut tools = tools(approval);
    if tools.is_empty() {
        tools.push(any_arguments(&call.function));
    }
    Ok(CallRequest {
        model: model.to_owned(),
        messages: conversation(approval)?,
        tools,
        choice: ToolChoice::Any,
        settings: Settings::default(),
        tag: None,
    })
}

/// `resample`: the untrusted model asked as the runner asked it (`generation`), for sample
/// number `index` of the call; `model` overrides the request's model. `Ok(None)` when the
/// request does not say how its model was asked.
pub fn resample(task: &v1::StepTask, model: Option<&str>, index: usize) -> Result<Option<CallRequest>, TaskError> {
    let approval = approval(task)?;
    let call_id = original(approval)?.id.as_str();
    let (Some(generation), Some(model)) = (&approval.generation, untrusted_model(task, model)) else {
        return Ok(None);
    };
    Ok(Some(CallRequest {
        model,
        messages: conversation(approval)?,
        tools: tools(approval),
        choice: ToolChoice::Auto,
        settings: settings(&generation.config_json),
        tag: Some(format!("airlock-resample-{call_id}-{index}")),
    }))
}

/// The untrusted model sampled for `task`: `configured` when given, else the model its
/// request names (`generation.model`, see [`model_name`]); `None` when neither says.
pub fn untrusted_model(task: &v1::StepTask, configured: Option<&str>) -> Option<String> {
    if let Some(model) = configured {
        return Some(model.to_owned());
    }
    let generation = approval(task).ok()?.generation.as_ref()?;
    Some(model_name(&generation.model).to_owned()).filter(|m| !m.trim().is_empty())
}

/// `task` as it would be had the model made `call` instead: the call, and the history's last
/// message, carry it; the assistant's text and the view (which describe the original) do not.
pub fn with_call(task: &v1::StepTask, call: &NoteCall) -> v1::StepTask {
    let mut task = task.clone();
    if let Some(v1::request::Body::Approval(approval)) = task.request.as_mut().and_then(|r| r.body.as_mut()) {
        let id = approval.call.as_ref().map(|c| c.id.clone()).unwrap_or_default();
        let wire = to_wire(&id, call);
        approval.message.clear();
        approval.view = None;
        if let Some(last) = approval.history.last_mut().filter(|m| m.role == "assistant") {
            last.text.clear();
            last.tool_calls = vec![wire.clone()];
        }
        approval.call = Some(wire);
    }
    task
}

/// `call` as the wire carries it, with the original call's id.
pub fn to_wire(id: &str, call: &NoteCall) -> v1::ToolCall {
    v1::ToolCall {
        id: id.to_owned(),
        function: call.function.clone(),
        arguments_json: Value::Object(call.arguments.clone()).to_string(),
        r#type: "function".into(),
        ..Default::default()
    }
}

/// The model's name as its API knows it, from Inspect's `<provider>/<model>`: the provider's
/// part removed (`openai/gpt-4o` → `gpt-4o`, `vllm/meta-llama/Llama-3.1-8B` →
/// `meta-llama/Llama-3.1-8B`, `openai-api/deepseek/deepseek-chat` → `deepseek-chat`); a name
/// without `/` as it is.
pub fn model_name(inspect: &str) -> &str {
    let Some((provider, rest)) = inspect.split_once('/') else { return inspect };
    if TWO_PART_PREFIXES.contains(&provider) {
        return rest.split_once('/').map_or(rest, |(_, model)| model);
    }
    rest
}

/// The conversation up to the call: the history without its last message, the assistant's
/// that carries the call.
fn conversation(approval: &v1::ApprovalRequest) -> Result<Vec<v1::ChatMessage>, TaskError> {
    let mut messages = approval.history.clone();
    if messages.last().is_some_and(|m| m.role == "assistant") {
        messages.pop();
    }
    if messages.is_empty() {
        return Err(TaskError("the request carries no conversation to ask a model from".into()));
    }
    Ok(messages)
}

/// The tools the untrusted model was offered (a schema that is not a JSON object reads as
/// any arguments).
fn tools(approval: &v1::ApprovalRequest) -> Vec<Tool> {
    let Some(generation) = &approval.generation else { return Vec::new() };
    generation
        .tools
        .iter()
        .map(|tool| Tool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: serde_json::from_str::<Value>(&tool.parameters_json)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({"type": "object"})),
        })
        .collect()
}

fn any_arguments(function: &str) -> Tool {
    Tool {
        name: function.to_owned(),
        description: format!("The agent's {function} tool."),
        parameters: json!({"type": "object"}),
    }
}

/// The settings of Inspect's `GenerateConfig` that carry over to a sample: `temperature`,
/// `top_p`, `max_tokens`, `stop_seqs` (a `seed` would make every sample the same, and is
/// left out).
fn settings(config_json: &str) -> Settings {
    let config = serde_json::from_str::<Value>(config_json).unwrap_or(Value::Null);
    Settings {
        temperature: config.get("temperature").and_then(Value::as_f64),
        top_p: config.get("top_p").and_then(Value::as_f64),
        max_tokens: config.get("max_tokens").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()),
        stop: config
            .get("stop_seqs")
            .and_then(Value::as_array)
            .map(|stops| stops.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_lose_inspects_provider() {
        assert_eq!(model_name("openai/gpt-4o"), "gpt-4o");
        assert_eq!(model_name("anthropic/claude-sonnet-4-5"), "claude-sonnet-4-5");
        assert_eq!(model_name("vllm/meta-llama/Llama-3.1-8B"), "meta-llama/Llama-3.1-8B");
        assert_eq!(model_name("openai-api/deepseek/deepseek-chat"), "deepseek-chat");
        assert_eq!(model_name("gpt-4o"), "gpt-4o");
    }

    #[test]
    fn samples_keep_the_runners_settings_but_its_seed() {
        let s = settings(r#"{"temperature": 0.7, "max_tokens": 300, "seed": 42, "stop_seqs": ["END"]}"#);
        assert_eq!(
            s,
            Settings { temperature: Some(0.7), top_p: None, max_tokens: Some(300), stop: vec!["END".into()] }
        );
        assert_eq!(settings("not json"), Settings::default());
    }
}
