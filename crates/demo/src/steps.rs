//! The demo's external steps, served in process exactly as a plugin or a reviewer would
//! serve them over the broker: consume the step's queue, answer with a `StepResult` on the
//! results queue, acknowledge once the answer is confirmed. The simulated human signs its
//! answers as a reviewer service does.

use std::sync::Arc;

use airlock_contract::v1;
use airlock_integrity::SigningKey;
use airlock_policy::Kind;
use airlock_records::convert::request_parts;
use airlock_records::signed::sign_human_answer;
use airlock_transport::{Destination, Message, Topology, Transport, TransportError};
use prost::Message as _;
use tokio::task::JoinSet;

use crate::AutoHuman;

/// A plugin step that bounds downloads: `curl …` becomes `curl … --max-time 5`.
pub const APPEND_TIMEOUT: &str = "demo/append_timeout";

/// Starts the plugin step and, when asked for, the simulated human of the `default` pool,
/// which signs its answers with `reviewer_key`.
pub async fn spawn<T: Transport>(
    transport: T,
    prefix: &str,
    human: Option<AutoHuman>,
    reviewer_key: Arc<SigningKey>,
) -> Result<JoinSet<()>, TransportError> {
    // The core too: the step queues are bound to the fleet's routing exchange.
    let topology = Topology::new(prefix).with_step(APPEND_TIMEOUT).with_human_pool("default");
    transport.declare(&topology).await?;
    let results = Topology::new(prefix).results_route();
    let mut servers = JoinSet::new();

    let mut plugin = transport.consume(&topology.step_queue(APPEND_TIMEOUT), 16).await?;
    let (t, to) = (transport.clone(), results.clone());
    servers.spawn(async move {
        while let Some(delivery) = plugin.next().await {
            let Ok(task) = v1::StepTask::decode(delivery.message.body.as_ref()) else {
                let _ = delivery.reject().await;
                continue;
            };
            let result = v1::StepResult { answer: Some(append_timeout(&task)), task: Some(task), ..Default::default() };
            if answer_task(&t, &to, result).await.is_ok() {
                let _ = delivery.ack().await;
            }
        }
    });

    let Some(human) = human else { return Ok(servers) };
    let mut people = transport.consume(&topology.human_queue("default"), 16).await?;
    servers.spawn(async move {
        while let Some(delivery) = people.next().await {
            let Ok(v1::HumanTask { task: Some(task), .. }) = v1::HumanTask::decode(delivery.message.body.as_ref())
            else {
                let _ = delivery.reject().await;
                continue;
            };
            let answer = simulated_human(&task, human);
            let mut result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
            sign_human_answer(&reviewer_key, &mut result);
            if answer_task(&transport, &results, result).await.is_ok() {
                let _ = delivery.ack().await;
            }
        }
    });
    Ok(servers)
}

async fn answer_task<T: Transport>(
    transport: &T,
    results: &Destination,
    result: v1::StepResult,
) -> Result<(), TransportError> {
    transport.publish(results, Message::new(result.encode_to_vec())).await
}

fn append_timeout(task: &v1::StepTask) -> v1::StepAnswer {
    let call = task
        .request
        .as_ref()
        .and_then(request_parts)
        .filter(|parts| parts.kind == Kind::Approval)
        .and_then(|parts| parts.call.cloned());
    let mut answer = v1::StepAnswer { decided_by: "demo-plugin".into(), ..Default::default() };
    let Some(mut call) = call else {
        answer.decision = v1::DecisionKind::Escalate.into();
        answer.explanation = Some("No call to bound.".into());
        return answer;
    };
    let mut arguments: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&call.arguments_json).unwrap_or_default();
    match arguments.get("cmd").and_then(|c| c.as_str()) {
        Some(cmd) if !cmd.contains("--max-time") => {
            let bounded = format!("{cmd} --max-time 5");
            arguments.insert("cmd".into(), bounded.into());
            call.arguments_json = serde_json::Value::Object(arguments).to_string();
            answer.decision = v1::DecisionKind::Modify.into();
            answer.explanation = Some("appended --max-time 5".into());
            answer.modified = Some(call);
        }
        _ => {
            answer.decision = v1::DecisionKind::Escalate.into();
            answer.explanation = Some("Already bounded; someone else decides.".into());
        }
    }
    answer
}

fn simulated_human(task: &v1::StepTask, human: AutoHuman) -> v1::StepAnswer {
    let review = task.request.as_ref().and_then(request_parts).is_some_and(|parts| parts.kind == Kind::Review);
    let decision = match (human, review) {
        (AutoHuman::Approve, false) => v1::DecisionKind::Approve,
        (AutoHuman::Approve, true) => v1::DecisionKind::Continue,
        (AutoHuman::Reject, false) => v1::DecisionKind::Reject,
        (AutoHuman::Reject, true) | (AutoHuman::Terminate, _) => v1::DecisionKind::Terminate,
    };
    v1::StepAnswer {
        decision: decision.into(),
        explanation: Some(format!("The simulated human chose {:?}.", human).to_lowercase()),
        decided_by: "simulated-human".into(),
        ..Default::default()
    }
}
