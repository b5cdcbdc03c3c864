//! A task's Slack message in Block Kit: while it waits, the call as Inspect renders it (the
//! view's context and call, or the default view), why it is here, a button per choice of its
//! step and a link to the task; once decided, who decided what and why, without buttons.
//!
//! Every text from the task is made display-safe and escaped for mrkdwn (`&`, `<`, `>`, so no
//! text can mention, link or ping), and cut to fit Slack's limits.

use airlock_policy::Decision;
use serde_json::{Value, json};

use crate::site::PublicUrl;
use crate::task::{DECIDED_BY_REROUTE, Task, Verdict};
use crate::ui::why::WhyHere;
use crate::ui::{Content, display_safe, shown};

/// The `action_id` of a decision's button: this prefix, then the decision (`value` is the
/// task's id).
pub const DECIDE_ACTION: &str = "airlock_decide_";
/// The `action_id` of the link to the task (Slack reports its presses too; they decide nothing).
pub const OPEN_ACTION: &str = "airlock_open";

/// The most characters of a call shown, escaped (a section holds 3,000, with its title).
const CALL_CHARS: usize = 2600;
/// The most characters of a title, of one answer's explanation or of what the model said.
const LINE_CHARS: usize = 300;
/// The most characters of a name (a pool, a reviewer, who asked, a policy, a step).
const NAME_CHARS: usize = 100;
/// The most lines of why a task is here (a context block holds 10 elements).
const WHY_LINES: usize = 10;

/// `text` made display-safe and escaped for Slack's mrkdwn, at most `max` characters once
/// escaped: cut with `…` when longer, never inside an escape.
pub fn escape(text: &str, max: usize) -> String {
    let piece = |c: char| match c {
        '&' => "&amp;".to_owned(),
        '<' => "&lt;".to_owned(),
        '>' => "&gt;".to_owned(),
        c => display_safe(c.encode_utf8(&mut [0; 4])),
    };
    let pieces: Vec<String> = text.chars().map(piece).collect();
    if pieces.iter().map(|p| p.chars().count()).sum::<usize>() <= max {
        return pieces.concat();
    }
    let mut out = String::new();
    let mut length = 0;
    for piece in pieces {
        length += piece.chars().count();
        if length >= max {
            break;
        }
        out.push_str(&piece);
    }
    out.push('…');
    out
}

/// The message of `task` waiting for a person: `{text, blocks}`, to which `chat.postMessage`
/// adds the channel.
pub fn pending(task: &Task, public_url: Option<&PublicUrl>) -> Value {
    let needed = task.approvals_needed();
    let mut headline = format!("*A call waits for a person* in pool `{}`", escape(&task.pool, NAME_CHARS));
    if needed > 1 {
        headline.push_str(&format!(" · needs {needed} approvals"));
    }
    let text = format!("A call waits for a person in pool {}", escape(&task.pool, NAME_CHARS));
    let mut blocks = vec![section(&headline)];
    blocks.extend(call(task));
    blocks.extend(why(task));
    let mut buttons: Vec<Value> = task
        .choices()
        .into_iter()
        .filter(|choice| *choice != Decision::Modify)
        .map(|choice| button(task, choice))
        .collect();
    let modify = task.choices().contains(&Decision::Modify);
    if let Some(url) = link(task, public_url) {
        let label = if modify { "Modify or open in Airlock" } else { "Open in Airlock" };
        buttons.push(json!({"type": "button", "action_id": OPEN_ACTION, "text": plain(label), "url": url}));
    }
    blocks.push(json!({"type": "actions", "elements": buttons}));
    json!({"text": text, "blocks": blocks})
}

/// The message of `task` once decided by `verdict`: `{text, blocks}`, to which `chat.update`
/// adds the channel and the message's `ts`.
pub fn decided(task: &Task, verdict: &Verdict, public_url: Option<&PublicUrl>) -> Value {
    let pool = escape(&task.pool, NAME_CHARS);
    let decision = verdict.decision.as_str();
    let headline = if verdict.timed_out() {
        format!("*No one answered in time* in pool `{pool}`, so *{decision}*")
    } else if verdict.decided_by == DECIDED_BY_REROUTE {
        let to = escape(task.reroute_to().unwrap_or_default(), NAME_CHARS);
        format!("*No one answered in time* in pool `{pool}`, so the call *moved to pool `{to}`*")
    } else {
        format!("*{}* decided *{decision}* in pool `{pool}`", escape(&verdict.decided_by, NAME_CHARS))
    };
    let text = headline.replace('*', "");
    let mut blocks = vec![section(&headline)];
    if !verdict.explanation.is_empty() {
        blocks.push(context(vec![format!("Why: {}", escape(&verdict.explanation, LINE_CHARS))]));
    }
    blocks.extend(call(task));
    blocks.extend(why(task));
    if let Some(url) = link(task, public_url) {
        blocks.push(json!({"type": "actions", "elements": [
            {"type": "button", "action_id": OPEN_ACTION, "text": plain("Open in Airlock"), "url": url}
        ]}));
    }
    json!({"text": text, "blocks": blocks})
}

/// The call as Inspect renders it: the view's context, then the call.
fn call(task: &Task) -> Vec<Value> {
    let shown = shown(task.call(), task.view(), task.result());
    shown.context.iter().chain([&shown.call]).map(|content| section(&mrkdwn(content))).collect()
}

/// One piece of the view in mrkdwn: its title in bold, markdown as it is (a fence's language
/// dropped, which Slack would show as code), plain text in a code block.
fn mrkdwn(content: &Content) -> String {
    let body = if content.markdown {
        let lines = content.text.lines().map(|line| if line.starts_with("```") { "```" } else { line });
        escape(&lines.collect::<Vec<_>>().join("\n"), CALL_CHARS)
    } else {
        format!("```{}```", escape(&content.text, CALL_CHARS))
    };
    match &content.title {
        Some(title) => format!("*{}*\n{body}", escape(title, LINE_CHARS)),
        None => body,
    }
}

/// Why the task is here: who asked, the policy, each answer of the chain before, and what the
/// model said with the call; a context block, or none when nothing is known.
fn why(task: &Task) -> Option<Value> {
    let WhyHere { asked, policy, answers } = WhyHere::of_task(task);
    let mut lines = Vec::new();
    let mut origin = Vec::new();
    if let Some(asked) = asked {
        let tenant = asked.tenant.map(|t| format!(" (tenant {})", escape(&t, NAME_CHARS))).unwrap_or_default();
        origin.push(format!("Asked by {}{tenant}", escape(&asked.by, NAME_CHARS)));
    }
    if let Some(policy) = policy {
        origin.push(format!("policy {}", escape(&policy.name, NAME_CHARS)));
    }
    if !origin.is_empty() {
        lines.push(origin.join(" · "));
    }
    for answer in answers {
        let by = answer.decided_by.map(|by| format!(" ({})", escape(&by, NAME_CHARS))).unwrap_or_default();
        let why = answer.explanation.map(|e| format!(": {}", escape(&e, LINE_CHARS))).unwrap_or_default();
        lines.push(format!("*{}*{by} answered *{}*{why}", escape(&answer.approver, NAME_CHARS), answer.decision));
    }
    let message = task.message().trim();
    if !message.is_empty() {
        lines.push(format!("The model said: {}", escape(message, LINE_CHARS)));
    }
    lines.truncate(WHY_LINES);
    (!lines.is_empty()).then(|| context(lines))
}

/// The button of `choice`: its `value` is the task's id.
fn button(task: &Task, choice: Decision) -> Value {
    let name = choice.as_str();
    let label = format!("{}{}", name[..1].to_uppercase(), &name[1..]);
    let mut button = json!({
        "type": "button",
        "action_id": format!("{DECIDE_ACTION}{name}"),
        "text": plain(&label),
        "value": task.id,
    });
    if choice == task.approving() {
        button["style"] = json!("primary");
    } else if matches!(choice, Decision::Reject | Decision::Terminate) {
        button["style"] = json!("danger");
    }
    button
}

/// The task in the UI, when the service knows its public URL.
fn link(task: &Task, public_url: Option<&PublicUrl>) -> Option<String> {
    public_url.map(|url| url.task(&task.id))
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

fn context(lines: Vec<String>) -> Value {
    let elements: Vec<Value> = lines.into_iter().map(|text| json!({"type": "mrkdwn", "text": text})).collect();
    json!({"type": "context", "elements": elements})
}

fn plain(text: &str) -> Value {
    json!({"type": "plain_text", "text": text})
}
