//! One task's card: everything a person needs to decide, its claim, the buttons of its
//! choices, its "every identical call" form and its incident form.

use std::fmt::Write as _;

use airlock_policy::{Decision, Kind};
use airlock_records::review::ApprovalView;

use super::claims::{claim, kept_from};
use super::why::WhyHere;
use super::{Content, ago, call_line, escape, safe_html, shown, utc};
use crate::auth::Reviewer;
use crate::modify::editable_arguments;
use crate::standing::{exact_pattern, standing_may_decide};
use crate::task::{State, Task, agreeing, same_reviewer, shortcut};

/// How long a standing decision may last, as the card offers it: seconds and label.
const DURATIONS: [(u64, &str); 4] =
    [(900, "15 minutes"), (3600, "1 hour"), (8 * 3600, "8 hours"), (24 * 3600, "24 hours")];

/// One task's card, as `reviewer` sees it: everything a person needs to decide, its claim,
/// and the buttons of its choices (disabled while another reviewer claims it, unless
/// `reviewer` holds the pool's override).
pub fn card(task: &Task, reviewer: &Reviewer, csrf: &str, now_ms: i64) -> String {
    let kind = task.kind();
    let call = task.call();
    let view = shown(call, task.view(), task.result());
    let function = call.map_or("(no call)", |c| c.function.as_str());
    let mut html = String::with_capacity(4096);
    let choices: Vec<&str> = task.choices().iter().map(|c| c.as_str()).collect();
    let _ = write!(
        html,
        "<article class=\"task {kind}\" id=\"task-{id}\" data-id=\"{id}\" data-choices=\"{choices}\" tabindex=\"-1\">",
        kind = kind,
        id = escape(&task.id),
        choices = escape(&choices.join(",")),
    );
    // Heading: kind, call, where it comes from, times.
    let _ = write!(
        html,
        "<header><div class=\"title\"><span class=\"badge {kind}\">{label}</span><h2 class=\"fn\">{function}</h2>\
         <span class=\"pool\">pool <b>{pool}</b>{from}</span></div>",
        label = if kind == Kind::Approval { "Approval" } else { "Review" },
        function = safe_html(function),
        pool = safe_html(&task.pool),
        from = task.rerouted_from().map_or_else(String::new, |from| format!(
            " <span class=\"rerouted\">moved from <b>{from}</b></span>",
            from = safe_html(from)
        )),
    );
    html.push_str("<dl class=\"origin\">");
    let origin = task.origin().cloned().unwrap_or_default();
    let key = task.request().and_then(|r| r.key.clone()).unwrap_or_default();
    let sample = if origin.sample_id.is_empty() { key.sample_id.clone() } else { origin.sample_id.clone() };
    let epoch = if origin.epoch == 0 { key.epoch } else { origin.epoch };
    for (label, value) in [
        ("Task", origin.task.as_str()),
        ("Sample", sample.as_str()),
        ("Epoch", &epoch.to_string()),
        ("Model", origin.model.as_str()),
        ("Call id", key.tool_call_id.as_str()),
    ] {
        if !value.is_empty() {
            let _ = write!(html, "<div><dt>{label}</dt><dd>{}</dd></div>", safe_html(value));
        }
    }
    html.push_str("</dl><div class=\"times\">");
    let _ = write!(
        html,
        "<span class=\"age\" data-since=\"{}\" title=\"received {}\">received {}</span>",
        task.received_at,
        utc(task.received_at),
        ago(now_ms - task.received_at)
    );
    if let Some(deadline) = task.deadline {
        let _ = write!(
            html,
            "<span class=\"deadline\" data-until=\"{}\" data-on-timeout=\"{on_timeout}\" title=\"deadline {}\">\
             deadline {} ({on_timeout} on timeout)</span>",
            deadline,
            utc(deadline),
            utc(deadline),
            on_timeout = task.on_timeout()
        );
    }
    html.push_str("</div>");
    if task.is_pending() {
        html.push_str(&claim(task, reviewer, csrf));
    }
    html.push_str("</header>");
    let why = WhyHere::of_task(task);
    html.push_str(&why_here(&why));
    html.push_str(&conversation(task));

    let message = task.message().trim();
    if !message.is_empty() {
        let _ = write!(
            html,
            "<section class=\"message\"><h3>Assistant</h3><div class=\"text\">{}</div></section>",
            safe_html(message)
        );
    }
    if let Some(context) = &view.context {
        let _ = write!(html, "<section class=\"context\"><h3>Context</h3>{}</section>", context.html());
    }
    let _ = write!(
        html,
        "<section class=\"call\"><h3>{}</h3>{}</section>",
        if kind == Kind::Review { "Tool call and result" } else { "Tool call" },
        view.call.html()
    );
    for protocol in why.answers.iter().filter_map(|answer| answer.protocol.as_ref()) {
        html.push_str(&protocol.html());
    }
    if contains_marker(task, &view.call, view.context.as_ref()) {
        html.push_str(
            "<p class=\"warn\">This task contains control, invisible or direction-changing characters; each is \
             shown as <span class=\"ctl\">\u{2039}U+XXXX\u{203A}</span>.</p>",
        );
    }

    match &task.state {
        State::Pending => {
            let approved = task.approved_by(&reviewer.name);
            let kept = kept_from(task, reviewer);
            html.push_str(&approvals(task, &reviewer.name, csrf));
            let _ = write!(
                html,
                "<form class=\"decide\" method=\"post\" action=\"/ui/tasks/{id}/decision\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                 <label class=\"explain\"><span>Explanation <i>(optional; the model sees it)</i></span>\
                 <textarea name=\"explanation\" rows=\"2\" maxlength=\"4000\"></textarea></label>\
                 <label class=\"incident-box\"><input type=\"checkbox\" name=\"incident\" value=\"true\"> \
                 An attack: mark it as an incident <i>(the run's response applies to all its samples)</i></label>",
                id = escape(&task.id),
                csrf = escape(csrf),
            );
            html.push_str(&arguments_editor(task));
            html.push_str("<div class=\"choices\">");
            for choice in task.choices() {
                let name = choice.as_str();
                let mut label = name.to_owned();
                label[..1].make_ascii_uppercase();
                let again = if kept {
                    format!(" disabled aria-describedby=\"claim-{}\"", escape(&task.id))
                } else if approved && choice == task.approving() {
                    format!(" disabled aria-describedby=\"approved-{}\"", escape(&task.id))
                } else {
                    String::new()
                };
                let _ = write!(
                    html,
                    "<button type=\"submit\" name=\"decision\" value=\"{name}\" class=\"btn {name}\" \
                     data-key=\"{key}\"{again}><kbd>{key}</kbd> {label}</button>",
                    key = shortcut(choice),
                );
            }
            html.push_str("</div><p class=\"status\" role=\"status\"></p></form>");
            html.push_str(&standing_form(task, csrf));
            html.push_str(&incident_form(task, csrf));
        }
        State::Decided(verdict) => {
            let _ = write!(
                html,
                "<p class=\"outcome\"><span class=\"badge {d}\">{d}</span> by <b>{by}</b> at {at}: {why}</p>",
                d = verdict.decision,
                by = safe_html(&verdict.decided_by),
                at = utc(verdict.decided_at),
                why = safe_html(&verdict.explanation),
            );
            html.push_str(&incident_form(task, csrf));
        }
        State::Cancelled { at, reason } => {
            let _ =
                write!(html, "<p class=\"outcome\">Withdrawn by the runner at {}: {}</p>", utc(*at), safe_html(reason));
        }
    }
    html.push_str("</article>");
    html
}

/// For a task that offers `modify`: the call's arguments as pretty JSON in an editor, and the
/// place the script says why they do not parse.
fn arguments_editor(task: &Task) -> String {
    let Some(call) = task.call().filter(|_| task.choices().contains(&Decision::Modify)) else {
        return String::new();
    };
    let text = editable_arguments(call);
    let id = escape(&task.id);
    format!(
        "<label class=\"arguments\"><span>Arguments of <code>{function}</code> <i>(a JSON object; Modify runs \
         the call with them)</i></span><textarea name=\"arguments\" rows=\"{rows}\" spellcheck=\"false\" \
         aria-describedby=\"arguments-error-{id}\">{text}</textarea></label>\
         <p class=\"error arguments-error\" id=\"arguments-error-{id}\" aria-live=\"polite\"></p>",
        function = safe_html(&call.function),
        rows = text.lines().count().clamp(3, 16),
        text = escape(&text),
    )
}

/// For a task that needs several approvals: how many the call most approved has of how many
/// (approvals of different calls count apart), who gave them and when, which modified call a
/// modify approved (with a button that approves that same call, for whoever has not approved
/// yet), and whether `reviewer`, looking, gave one (then they cannot approve again).
fn approvals(task: &Task, reviewer: &str, csrf: &str) -> String {
    let needed = task.approvals_needed();
    if needed < 2 {
        return String::new();
    }
    let count = |approval: &ApprovalView| agreeing(&task.approvals, approval).len();
    let most = task.approvals.iter().map(count).max().unwrap_or_default();
    let own = task.approvals.iter().find(|a| same_reviewer(&a.reviewer, reviewer));
    let mut html = format!("<section class=\"approvals\"><p><b>{most} of {needed} approvals</b>");
    if !task.approvals.is_empty() {
        let names: Vec<String> = task.approvals.iter().map(|a| safe_html(&a.reviewer)).collect();
        let _ = write!(html, ": {}", names.join(", "));
    }
    html.push_str("</p>");
    if !task.approvals.is_empty() {
        html.push_str("<ol class=\"answers\">");
        for approval in &task.approvals {
            let _ = write!(
                html,
                "<li class=\"answer\"><span class=\"approver\">{}</span> <span class=\"by\">at {}</span>\
                 <p class=\"why\">{}</p>",
                safe_html(&approval.reviewer),
                utc(approval.at_unix_ms),
                safe_html(&approval.explanation)
            );
            if let Some(arguments) = &approval.modified_arguments {
                let _ =
                    write!(html, "<p class=\"modified\">Modified arguments: <code>{}</code></p>", safe_html(arguments));
                if own.is_none() {
                    let _ = write!(
                        html,
                        "<form method=\"post\" action=\"/ui/tasks/{id}/decision\">\
                         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                         <input type=\"hidden\" name=\"arguments\" value=\"{arguments}\">\
                         <button type=\"submit\" name=\"decision\" value=\"modify\" class=\"btn modify\">\
                         Approve this modified call</button></form>",
                        id = escape(&task.id),
                        csrf = escape(csrf),
                        arguments = escape(arguments),
                    );
                }
            }
            html.push_str("</li>");
        }
        html.push_str("</ol>");
    }
    if let Some(own) = own {
        let _ = write!(
            html,
            "<p class=\"note\" id=\"approved-{}\">You approved this task; it needs {} from another reviewer.</p>",
            escape(&task.id),
            match (needed as usize).saturating_sub(count(own)) {
                1 => "one more approval".to_owned(),
                n => format!("{n} more approvals"),
            },
        );
    }
    html.push_str("</section>");
    html
}

/// Why the task is here: who asked and the policy, then every answer before this step with
/// its explanation and metadata (a monitor's score, reason and model by name).
fn why_here(why: &WhyHere) -> String {
    let mut html = String::from("<section class=\"trail\"><h3>Why it is here</h3>");
    if let Some(asked) = &why.asked {
        let _ = write!(html, "<p class=\"caller\">Asked by <span class=\"name\">{}</span>", safe_html(&asked.by));
        if let Some(tenant) = &asked.tenant {
            let _ = write!(html, " for <span class=\"name\">{}</span>", safe_html(tenant));
        }
        html.push_str("</p>");
    }
    if let Some(policy) = &why.policy {
        let _ = write!(html, "<p class=\"policy\">Policy <span class=\"name\">{}</span>", safe_html(&policy.name));
        if !policy.digest.is_empty() {
            let _ = write!(
                html,
                " <code class=\"digest\" title=\"sha256 of the policy's text\">{}</code>",
                safe_html(&policy.digest)
            );
        }
        html.push_str("</p>");
    }
    if why.answers.is_empty() {
        html.push_str("<p class=\"empty\">No step answered before this one.</p>");
    } else {
        html.push_str("<ol class=\"answers\">");
        for answer in &why.answers {
            let decision = answer.decision;
            let step = answer.step.map(|s| format!("<span class=\"step\">step {s}</span> ")).unwrap_or_default();
            let _ = write!(
                html,
                "<li class=\"answer\">{step}<span class=\"approver\">{}</span> <span class=\"badge {decision}\">{decision}</span>",
                safe_html(&answer.approver)
            );
            if let Some(by) = &answer.decided_by {
                let _ = write!(html, " <span class=\"by\">by {}</span>", safe_html(by));
            }
            if let Some(explanation) = &answer.explanation {
                let _ = write!(html, "<p class=\"why\">{}</p>", safe_html(explanation));
            }
            if !answer.fields.is_empty() {
                html.push_str("<dl class=\"meta\">");
                for field in &answer.fields {
                    let _ = write!(
                        html,
                        "<div class=\"{}\"><dt>{}</dt><dd>{}</dd></div>",
                        if field.monitor { "monitor" } else { "other" },
                        safe_html(&field.label),
                        safe_html(&field.value)
                    );
                }
                html.push_str("</dl>");
            }
            html.push_str("</li>");
        }
        html.push_str("</ol>");
    }
    html.push_str("</section>");
    html
}

/// The conversation the request carries, collapsed: a person opens it when the call alone
/// does not say enough.
fn conversation(task: &Task) -> String {
    let history = task.history();
    if history.messages.is_empty() {
        return String::new();
    }
    let omitted = match history.omitted {
        0 => String::new(),
        n => format!(", {n} earlier left out"),
    };
    let mut html = format!(
        "<details class=\"conversation\"><summary>Conversation ({} message{}{omitted})</summary><ol>",
        history.messages.len(),
        if history.messages.len() == 1 { "" } else { "s" }
    );
    for message in history.messages {
        let role = safe_html(&message.role);
        let _ = write!(html, "<li class=\"msg\"><span class=\"role\">{role}</span>");
        if let Some(function) = message.function.as_deref().filter(|f| !f.is_empty()) {
            let _ = write!(html, " <code class=\"fn\">{}</code>", safe_html(function));
        }
        if !message.text.is_empty() {
            let _ = write!(html, "<div class=\"text\">{}</div>", safe_html(&message.text));
        }
        for call in &message.tool_calls {
            let _ = write!(html, "<pre class=\"text\">{}</pre>", safe_html(&call_line(call)));
        }
        if let Some(error) = &message.error {
            let _ = write!(
                html,
                "<p class=\"error\">Error ({}): {}</p>",
                safe_html(&error.r#type),
                safe_html(&error.message)
            );
        }
        html.push_str("</li>");
    }
    html.push_str("</ol></details>");
    html
}

fn contains_marker(task: &Task, call: &Content, context: Option<&Content>) -> bool {
    let unsafe_in = |s: &str| s.chars().any(super::is_unsafe);
    unsafe_in(task.message())
        || unsafe_in(&call.text)
        || context.is_some_and(|c| unsafe_in(&c.text))
        || task.call().is_some_and(|c| unsafe_in(&c.function))
        || task.trail().iter().any(|a| a.explanation.as_deref().is_some_and(unsafe_in) || unsafe_in(&a.metadata_json))
        || task.history().messages.iter().any(|m| unsafe_in(&m.text))
}

/// A pending task's "every identical call" form, collapsed: where, for how long, the pattern
/// (prefilled with the task's call escaped, so it matches that call alone) and the choices a
/// standing decision may give. Empty for a task whose call cannot be read.
pub fn standing_form(task: &Task, csrf: &str) -> String {
    let Some(pattern) = exact_pattern(task) else { return String::new() };
    let id = escape(&task.id);
    let mut html = String::with_capacity(2048);
    let _ = write!(
        html,
        "<details class=\"standing\"><summary>Answer every identical call…</summary>\
         <form class=\"decide standing\" method=\"post\" action=\"/ui/tasks/{id}/standing\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><div class=\"fields\">\
         <label><span>Where</span><select name=\"scope\"><option value=\"sample\" selected>this sample</option>\
         <option value=\"run\">this run</option><option value=\"pool\">the whole pool</option></select></label>\
         <label><span>For</span><select name=\"seconds\">",
        csrf = escape(csrf),
    );
    for (seconds, label) in DURATIONS {
        let selected = if seconds == 3600 { " selected" } else { "" };
        let _ = write!(html, "<option value=\"{seconds}\"{selected}>{label}</option>");
    }
    let _ = write!(
        html,
        "</select></label></div><label class=\"pattern\"><span>Calls matching <i>(a glob over the whole call: \
         * matches anything)</i></span><input name=\"pattern\" value=\"{}\" spellcheck=\"false\" autocomplete=\"off\">\
         </label><label class=\"explain\"><span>Explanation <i>(optional; the model sees it)</i></span>\
         <textarea name=\"explanation\" rows=\"1\" maxlength=\"4000\"></textarea></label><div class=\"choices\">",
        escape(&pattern),
    );
    for choice in task.choices().into_iter().filter(|c| standing_may_decide(task, *c)) {
        let name = choice.as_str();
        let _ = write!(
            html,
            "<button type=\"submit\" name=\"decision\" value=\"{name}\" class=\"btn {name}\">{name} all</button>"
        );
    }
    html.push_str("</div><p class=\"status\" role=\"status\"></p></form></details>");
    html
}

/// The incident form of a task, pending or decided, collapsed: a note and a button that marks
/// the task as an incident (an attack) in its run.
pub fn incident_form(task: &Task, csrf: &str) -> String {
    format!(
        "<details class=\"incident\"><summary>Mark as an incident\u{2026}</summary>\
         <form class=\"incident\" method=\"post\" action=\"/ui/tasks/{id}/incident\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label><span>What the call attempts <i>(for people; the model never sees it)</i></span>\
         <textarea name=\"note\" rows=\"1\" maxlength=\"4000\"></textarea></label>\
         <button type=\"submit\" class=\"btn terminate small\">Mark as an incident</button></form></details>",
        id = escape(&task.id),
        csrf = escape(csrf),
    )
}
