//! The web UI's pages, rendered on the server: the pending list (its cards are
//! [`super::card`]'s), identical calls grouped, the history, the standing decisions, the canaries' catch rates and the
//! runs under control (for
//! admins) and the login page. Every value
//! from a task goes through [`safe_html`] or [`super::Content::html`]; the only script is
//! `app.js`, served from this process.

use std::fmt::Write as _;

use super::{card, escape, safe_html, triage, utc};
use crate::auth::Reviewer;
use crate::task::{State, Task};
use crate::triage::{Page, Triage};

mod canaries;
mod groups;
mod runs;
mod standing;

pub use canaries::canaries;
pub use groups::{GroupConfirmation, confirm_group, group_decided, groups};
pub use runs::runs;
pub use standing::standing;

/// The stylesheet, served at `/assets/app.css`.
pub const CSS: &str = include_str!("../../assets/app.css");
/// The script, served at `/assets/app.js`.
pub const JS: &str = include_str!("../../assets/app.js");

/// Who is looking, for the header.
#[derive(Debug, Clone)]
pub struct Viewer<'a> {
    /// The reviewer (an admin has the Canaries and Runs pages).
    pub reviewer: &'a Reviewer,
    /// The reviewer's pools (among the service's).
    pub pools: &'a [String],
    /// The session's CSRF token.
    pub csrf: &'a str,
    /// Whether opening (focusing) a task claims it.
    pub claim_on_open: bool,
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
         <script src=\"/assets/app.js\" defer></script></head><body data-page=\"{active}\"{claim_on_open}>",
        escape(title),
        claim_on_open = if viewer.is_some_and(|v| v.claim_on_open) { " data-claim-on-open=\"true\"" } else { "" },
    );
    html.push_str("<header class=\"top\"><div class=\"brand\"><span class=\"logo\">&#9670;</span> Airlock <span>review</span></div>");
    if let Some(viewer) = viewer {
        let count = pending.map(|n| format!(" <span id=\"count\" class=\"count\">{n}</span>")).unwrap_or_default();
        let class = |page: &str| if page == active { " class=\"active\"" } else { "" };
        let admin = |path: &str, name: &str| {
            if viewer.reviewer.admin { format!("<a href=\"/{path}\"{}>{name}</a>", class(path)) } else { String::new() }
        };
        let (canaries, runs) = (admin("canaries", "Canaries"), admin("runs", "Runs"));
        let _ = write!(
            html,
            "<nav><a href=\"/\"{}>Pending{count}</a><a href=\"/groups\"{}>Identical</a>\
             <a href=\"/history\"{}>History</a><a href=\"/standing\"{}>Standing</a>{canaries}{runs}</nav>\
             <div class=\"who\"><span class=\"name\">{}</span><span class=\"pools\">{}</span>\
             <form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button class=\"link\" type=\"submit\">Log out</button></form></div>",
            class("pending"),
            class("groups"),
            class("history"),
            class("standing"),
            escape(&viewer.reviewer.name),
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
         happen\">connecting…</span><a href=\"/groups\">Group identical calls</a>\
         <button type=\"button\" id=\"view\" class=\"view\" hidden>View: cards</button></div>",
    );
    body.push_str(&triage::form(page, &triage.filter));
    body.push_str(&triage::results(page, triage, viewer.reviewer, viewer.csrf, now_ms));
    body.push_str(
        "<footer class=\"keys\"><kbd>a</kbd> approve <kbd>r</kbd> reject <kbd>t</kbd> terminate \
         <kbd>c</kbd> continue <kbd>e</kbd> escalate <kbd>m</kbd> modify, on the selected task · <kbd>j</kbd>/<kbd>k</kbd> next/previous \
         · <kbd>x</kbd> write an explanation · <kbd>Esc</kbd> leave the field · <kbd>v</kbd> view: cards, compact, \
         one at a time</footer>",
    );
    let pending = usize::try_from(page.pending()).unwrap_or(usize::MAX);
    shell(&format!("({pending}) Airlock review"), "pending", Some(viewer), Some(pending), &body)
}

/// The tasks that left the list: decided (by whom) or withdrawn.
pub fn history(viewer: &Viewer<'_>, tasks: &[Task]) -> String {
    let mut body = String::from("<div class=\"bar\"><h1>History</h1></div>");
    if tasks.is_empty() {
        body.push_str("<p class=\"empty\">Nothing decided yet.</p>");
    } else {
        body.push_str(
            "<table class=\"history\"><thead><tr><th>When</th><th>Kind</th><th>Pool</th><th>Call</th>\
             <th>Sample</th><th>Decision</th><th>Decided by</th><th>Explanation</th><th>Incident</th></tr></thead><tbody>",
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
                 <td>{decision}</td><td>{by}</td><td class=\"why\">{why}</td><td>{}</td></tr>",
                utc(when),
                task.kind(),
                safe_html(&task.pool),
                safe_html(&call),
                safe_html(&sample),
                card::incident_form(task, viewer.csrf),
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
