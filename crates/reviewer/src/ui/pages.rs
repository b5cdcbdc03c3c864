//! The web UI's pages, rendered on the server: the pending list, one task's card, the
//! history, the standing decisions and the login page. Every value from a task goes through [`safe_html`] or
//! [`Content::html`]; the only script is `app.js`, served from this process.

use std::fmt::Write as _;

use airlock_policy::{Decision, Kind};
use airlock_records::review::ApprovalView;
use airlock_records::time::Utc;

use super::{Content, call_line, escape, metadata_fields, safe_html, shown, triage};
use crate::auth::same_reviewer;
use crate::modify::editable_arguments;
use crate::task::{State, Task, agreeing, decision_from_wire, shortcut};
use crate::triage::{Page, Triage};

mod standing;

pub use standing::{standing, standing_form};

/// The stylesheet, served at `/assets/app.css`.
pub const CSS: &str = include_str!("../../assets/app.css");
/// The script, served at `/assets/app.js`.
pub const JS: &str = include_str!("../../assets/app.js");

/// Who is looking, for the header.
#[derive(Debug, Clone)]
pub struct Viewer<'a> {
    /// The reviewer's name.
    pub name: &'a str,
    /// The reviewer's pools (among the service's).
    pub pools: &'a [String],
    /// The session's CSRF token.
    pub csrf: &'a str,
}

fn shell(title: &str, active: &str, viewer: Option<&Viewer<'_>>, pending: Option<usize>, body: &str) -> String {
    let mut html = String::with_capacity(body.len() + 2048);
    let csrf = viewer.map(|v| escape(v.csrf)).unwrap_or_default();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"csrf-token\" content=\"{csrf}\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/assets/app.css\">\
         <script src=\"/assets/app.js\" defer></script></head><body data-page=\"{active}\">",
        escape(title)
    );
    html.push_str("<header class=\"top\"><div class=\"brand\"><span class=\"logo\">&#9670;</span> Airlock <span>review</span></div>");
    if let Some(viewer) = viewer {
        let count = pending.map(|n| format!(" <span id=\"count\" class=\"count\">{n}</span>")).unwrap_or_default();
        let class = |page: &str| if page == active { " class=\"active\"" } else { "" };
        let _ = write!(
            html,
            "<nav><a href=\"/\"{}>Pending{count}</a><a href=\"/history\"{}>History</a>\
             <a href=\"/standing\"{}>Standing</a></nav>\
             <div class=\"who\"><span class=\"name\">{}</span><span class=\"pools\">{}</span>\
             <form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button class=\"link\" type=\"submit\">Log out</button></form></div>",
            class("pending"),
            class("history"),
            class("standing"),
            escape(viewer.name),
            viewer.pools.iter().map(|p| escape(p)).collect::<Vec<_>>().join(" · "),
        );
    }
    html.push_str("</header><main>");
    html.push_str(body);
    html.push_str("</main></body></html>\n");
    html
}

/// The login page, with an error when a token was refused.
pub fn login(error: Option<&str>) -> String {
    let error = error.map(|e| format!("<p class=\"error\">{}</p>", escape(e))).unwrap_or_default();
    let body = format!(
        "<section class=\"login\"><h1>Sign in</h1>\
         <p>Paste the token you were given (<code>airlock reviewer add-token</code> prints it once).</p>{error}\
         <form method=\"post\" action=\"/login\"><label for=\"token\">Token</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" autofocus required>\
         <button class=\"btn primary\" type=\"submit\">Sign in</button></form></section>"
    );
    shell("Airlock review: sign in", "login", None, None, &body)
}

/// The pending list: the filter form, then one page of what it matches.
pub fn pending(viewer: &Viewer<'_>, page: &Page, triage: &Triage, now_ms: i64) -> String {
    let mut body = String::new();
    body.push_str(
        "<div class=\"bar\"><h1>Pending tasks</h1><span id=\"live\" class=\"live\" title=\"updates arrive as they \
         happen\">connecting…</span></div>",
    );
    body.push_str(&triage::form(page, &triage.filter));
    body.push_str(&triage::results(page, triage, viewer.name, viewer.csrf, now_ms));
    body.push_str(
        "<footer class=\"keys\"><kbd>a</kbd> approve <kbd>r</kbd> reject <kbd>t</kbd> terminate \
         <kbd>c</kbd> continue <kbd>e</kbd> escalate <kbd>m</kbd> modify, on the selected task · <kbd>j</kbd>/<kbd>k</kbd> next/previous \
         · <kbd>x</kbd> write an explanation · <kbd>Esc</kbd> leave the field</footer>",
    );
    let pending = usize::try_from(page.pending()).unwrap_or(usize::MAX);
    shell(&format!("({pending}) Airlock review"), "pending", Some(viewer), Some(pending), &body)
}

/// One task's card, as `reviewer` sees it: everything a person needs to decide, and the
/// buttons of its choices.
pub fn card(task: &Task, reviewer: &str, csrf: &str, now_ms: i64) -> String {
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
         <span class=\"pool\">pool <b>{pool}</b></span></div>",
        label = if kind == Kind::Approval { "Approval" } else { "Review" },
        function = safe_html(function),
        pool = safe_html(&task.pool),
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
    html.push_str("</div></header>");
    html.push_str(&why_here(task));
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
    if contains_marker(task, &view.call, view.context.as_ref()) {
        html.push_str(
            "<p class=\"warn\">This task contains control, invisible or direction-changing characters; each is \
             shown as <span class=\"ctl\">\u{2039}U+XXXX\u{203A}</span>.</p>",
        );
    }

    match &task.state {
        State::Pending => {
            let approved = task.approved_by(reviewer);
            html.push_str(&approvals(task, reviewer, csrf));
            let _ = write!(
                html,
                "<form class=\"decide\" method=\"post\" action=\"/ui/tasks/{id}/decision\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                 <label class=\"explain\"><span>Explanation <i>(optional; the model sees it)</i></span>\
                 <textarea name=\"explanation\" rows=\"2\" maxlength=\"4000\"></textarea></label>",
                id = escape(&task.id),
                csrf = escape(csrf),
            );
            html.push_str(&arguments_editor(task));
            html.push_str("<div class=\"choices\">");
            for choice in task.choices() {
                let name = choice.as_str();
                let mut label = name.to_owned();
                label[..1].make_ascii_uppercase();
                let again = if approved && choice == task.approving() {
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
fn why_here(task: &Task) -> String {
    let mut html = String::from("<section class=\"trail\"><h3>Why it is here</h3>");
    let caller = task.caller();
    if !caller.requested_by.is_empty() || !caller.tenant.is_empty() {
        let by = if caller.requested_by.is_empty() { "a runner" } else { caller.requested_by.as_str() };
        let _ = write!(html, "<p class=\"caller\">Asked by <span class=\"name\">{}</span>", safe_html(by));
        if !caller.tenant.is_empty() {
            let _ = write!(html, " for <span class=\"name\">{}</span>", safe_html(&caller.tenant));
        }
        html.push_str("</p>");
    }
    if let Some(policy) = task.policy() {
        let name = policy.name.as_deref().map_or_else(|| "inline document".to_owned(), safe_html);
        let _ = write!(html, "<p class=\"policy\">Policy <span class=\"name\">{name}</span>");
        if !policy.digest.is_empty() {
            let _ = write!(
                html,
                " <code class=\"digest\" title=\"sha256 of the policy's text\">{}</code>",
                safe_html(&policy.digest)
            );
        }
        html.push_str("</p>");
    }
    if task.trail().is_empty() {
        html.push_str("<p class=\"empty\">No step answered before this one.</p>");
    } else {
        html.push_str("<ol class=\"answers\">");
        for answer in task.trail() {
            let decision = decision_from_wire(answer.decision).map_or("unspecified", |d| d.as_str());
            let step = answer.step.map(|s| format!("<span class=\"step\">step {s}</span> ")).unwrap_or_default();
            let _ = write!(
                html,
                "<li class=\"answer\">{step}<span class=\"approver\">{}</span> <span class=\"badge {decision}\">{decision}</span>",
                safe_html(&answer.approver)
            );
            if !answer.decided_by.is_empty() {
                let _ = write!(html, " <span class=\"by\">by {}</span>", safe_html(&answer.decided_by));
            }
            if let Some(explanation) = answer.explanation.as_deref().filter(|e| !e.is_empty()) {
                let _ = write!(html, "<p class=\"why\">{}</p>", safe_html(explanation));
            }
            let fields = metadata_fields(&answer.metadata_json);
            if !fields.is_empty() {
                html.push_str("<dl class=\"meta\">");
                for field in fields {
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

/// The tasks that left the list: decided (by whom) or withdrawn.
pub fn history(viewer: &Viewer<'_>, tasks: &[Task]) -> String {
    let mut body = String::from("<div class=\"bar\"><h1>History</h1></div>");
    if tasks.is_empty() {
        body.push_str("<p class=\"empty\">Nothing decided yet.</p>");
    } else {
        body.push_str(
            "<table class=\"history\"><thead><tr><th>When</th><th>Kind</th><th>Pool</th><th>Call</th>\
             <th>Sample</th><th>Decision</th><th>Decided by</th><th>Explanation</th></tr></thead><tbody>",
        );
        for task in tasks {
            let call = task.call().map_or(String::new(), |c| c.function.clone());
            let sample = task.origin().map(|o| format!("{} #{}", o.sample_id, o.epoch)).unwrap_or_default();
            let (when, decision, by, why) = match &task.state {
                State::Decided(v) => (
                    v.decided_at,
                    format!("<span class=\"badge {0}\">{0}</span>", v.decision),
                    safe_html(&v.decided_by),
                    safe_html(&v.explanation),
                ),
                State::Cancelled { at, reason } => {
                    (*at, "<span class=\"badge withdrawn\">withdrawn</span>".into(), "runner".into(), safe_html(reason))
                }
                State::Pending => (0, String::new(), String::new(), String::new()),
            };
            let _ = write!(
                body,
                "<tr><td class=\"nowrap\">{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td>\
                 <td>{decision}</td><td>{by}</td><td class=\"why\">{why}</td></tr>",
                utc(when),
                task.kind(),
                safe_html(&task.pool),
                safe_html(&call),
                safe_html(&sample),
            );
        }
        body.push_str("</tbody></table>");
    }
    shell("Airlock review: history", "history", Some(viewer), None, &body)
}

/// A short error page.
pub fn error(status: &str, message: &str) -> String {
    let body = format!(
        "<section class=\"login\"><h1>{}</h1><p>{}</p><p><a href=\"/\">Back</a></p></section>",
        escape(status),
        escape(message)
    );
    shell("Airlock review", "error", None, None, &body)
}

/// `ms` (a duration) as "12s ago", "3m ago", "2h 5m ago".
pub fn ago(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        _ => format!("{}h {}m ago", s / 3600, (s % 3600) / 60),
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: i64) -> String {
    let Utc { year, month, day, hour, minute, second } = Utc::from_unix_seconds(ms.div_euclid(1000));
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02} UTC")
}
