//! A canary's human task, modelled on a real pending approval task of its pool, so that no
//! field a reviewer sees tells the two apart by anything but content and ids.
//!
//! Kept from the real task: the run, sample, epoch and tenant of its key, its origin (eval,
//! task, model, runner), the broker user that asked, the policy, the step, its name,
//! parameters and choices, the approvals it needs, its `on_timeout`, the time it had left (its
//! deadlines, moved to now), the earlier steps of the chain and the conversation before the
//! call. Replaced: the tool call id (one of the same shape, [`lookalike`]), the call, its view
//! and the assistant message's text, also in the conversation's last assistant message; the
//! earlier steps' answers that the canary's `trail` names. Dropped, since a canary's answer
//! goes nowhere: the reply queue, the runner's key, the trace context, the seal and the
//! request's digest.

use airlock_contract::v1;
use airlock_records::convert::decision_to_wire;
use airlock_records::review::{ToolContentView, ToolViewView};
use serde_json::Value;

use super::{Canary, Dice};
use crate::task::Task;

/// The human task of `canary`, modelled on `template` (a pending real approval task of its
/// pool) as if it arrived at `now`; `None` when `template` carries no approval request.
pub fn modelled_on(canary: &Canary, template: &Task, now: i64, dice: &mut Dice) -> Option<v1::HumanTask> {
    let mut human = template.human.clone();
    let shift = now - template.received_at;
    let moved = |at: i64| if at > 0 { at + shift } else { at };
    let step = human.task.as_mut()?;
    step.deadline_unix_ms = moved(step.deadline_unix_ms);
    step.trace_context.clear();
    step.seal.clear();
    step.request_digest.clear();
    let request = step.request.as_mut()?;
    request.deadline_unix_ms = moved(request.deadline_unix_ms);
    request.requested_at_unix_ms = moved(request.requested_at_unix_ms);
    request.reply_to.clear();
    request.runner_key.clear();
    let key = request.key.as_mut()?;
    key.tool_call_id = lookalike(&key.tool_call_id, dice);
    let view = canary.view.as_ref().map(tool_view);
    let call = v1::ToolCall {
        id: key.tool_call_id.clone(),
        function: canary.function.clone(),
        arguments_json: serde_json::to_string(&canary.arguments).ok()?,
        parse_error: None,
        r#type: "function".into(),
        view: view.as_ref().and_then(|v| v.call.clone()),
        metadata_json: String::new(),
    };
    if let Some(chain) = request.chain.as_mut() {
        for answer in &mut chain.trail {
            answer.started_at_unix_ms = moved(answer.started_at_unix_ms);
            answer.answered_at_unix_ms = moved(answer.answered_at_unix_ms);
            if let Some(said) = canary.trail.iter().find(|said| said.approver == answer.approver) {
                if let Some(decision) = said.decision {
                    answer.decision = decision_to_wire(decision).into();
                }
                answer.explanation = said.explanation.as_ref().map(|e| e.to_string());
                answer.metadata_json = said.metadata.as_ref().map(Value::to_string).unwrap_or_default();
                if let Some(by) = &said.decided_by {
                    answer.decided_by.clone_from(by);
                }
            }
        }
    }
    let Some(v1::request::Body::Approval(body)) = request.body.as_mut() else { return None };
    body.message.clone_from(&canary.message);
    body.view = view;
    if let Some(last) = body.history.iter_mut().rev().find(|m| m.role == "assistant") {
        last.text.clone_from(&canary.message);
        last.tool_calls = vec![call.clone()];
    }
    body.call = Some(call);
    Some(human)
}

/// Inspect's `ToolCallView` on the wire.
fn tool_view(view: &ToolViewView) -> v1::ToolCallView {
    let content = |c: &ToolContentView| v1::ToolCallContent {
        title: c.title.clone(),
        format: c.format.clone(),
        content: c.content.clone(),
    };
    v1::ToolCallView { context: view.context.as_ref().map(content), call: view.call.as_ref().map(content) }
}

/// A tool call id of the same shape as `id`, and not `id`: what precedes its last `_` kept
/// (`call_`, `toolu_`), every digit, lowercase and uppercase letter of the rest drawn anew
/// from its own class (from the hex digits when the rest is 8 hex digits or more with a
/// letter among them, as a UUID is), everything else kept. An id with nothing to draw gets eight hex digits more.
pub fn lookalike(id: &str, dice: &mut Dice) -> String {
    const DIGITS: &[u8] = b"0123456789";
    const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const HEX: &[u8] = b"0123456789abcdef";
    let (prefix, rest) = id.rfind('_').map_or(("", id), |at| id.split_at(at + 1));
    let hex = rest.chars().any(|c| matches!(c, 'a'..='f'))
        && rest.chars().filter(|c| *c != '-').count() >= 8
        && rest.chars().all(|c| c.is_ascii_digit() || matches!(c, 'a'..='f' | '-'));
    let mut draw = |class: &[u8]| char::from(class[dice.below(class.len())]);
    loop {
        let mut drawn = String::with_capacity(id.len() + 8);
        drawn.push_str(prefix);
        for c in rest.chars() {
            drawn.push(match c {
                '0'..='9' | 'a'..='f' if hex => draw(HEX),
                '0'..='9' => draw(DIGITS),
                'a'..='z' => draw(LOWER),
                'A'..='Z' => draw(UPPER),
                other => other,
            });
        }
        if !rest.chars().any(|c| c.is_ascii_alphanumeric()) {
            (0..8).for_each(|_| drawn.push(draw(HEX)));
        }
        if drawn != id {
            return drawn;
        }
    }
}
