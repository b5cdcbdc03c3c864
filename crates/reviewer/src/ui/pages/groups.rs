//! The groups page: identical pending calls across samples and runs, one card per group with
//! its count and the decisions it offers; the confirmation page, which shows the count before
//! anything is decided; and the page saying what a group decision did.

use std::fmt::Write as _;

use airlock_policy::Decision;
use airlock_records::review::groups::GroupDecided;

use super::{Viewer, shell};
use crate::desk::groups::Group;
use crate::task::Task;
use crate::ui::{ago, call_line, escape, safe_html};

/// What the confirmation page shows.
#[derive(Debug)]
pub struct GroupConfirmation<'a> {
    /// The group as it stands now.
    pub group: &'a Group,
    /// The decision asked for.
    pub decision: &'a str,
    /// The explanation given.
    pub explanation: &'a str,
    /// The count the person saw on the groups page.
    pub seen: u64,
}

/// The pool, kind, step and call every task of a group shares.
fn identity(task: &Task) -> String {
    let call = task.call().map(call_line).unwrap_or_default();
    format!(
        "<p class=\"meta\">{} · {} · step {}</p><pre class=\"call\"><code>{}</code></pre>",
        safe_html(&task.pool),
        task.kind(),
        task.step,
        safe_html(&call)
    )
}

/// The decisions a group offers: its choices but `modify`.
fn decisions(task: &Task) -> impl Iterator<Item = Decision> {
    task.choices().into_iter().filter(|d| *d != Decision::Modify)
}

/// The groups of identical pending calls, the largest first.
pub fn groups(viewer: &Viewer<'_>, groups: &[Group], now_ms: i64) -> String {
    let mut body = String::from(
        "<div class=\"bar\"><h1>Identical calls</h1><a href=\"/\">Back to the pending list</a></div>\
         <p class=\"hint\">Pending calls that are the same call (the same text, pool, step, caller and policy) \
         in different samples and runs. One decision answers every task of a group, after a confirmation; each \
         task is decided, signed and recorded on its own. Steps that need several approvals are never grouped.</p>",
    );
    if groups.is_empty() {
        body.push_str("<p class=\"empty\">No two pending calls are identical.</p>");
    }
    for group in groups {
        let (id, count, first) = (escape(&group.count.group), group.count.count, &group.first);
        let _ = write!(
            body,
            "<section class=\"card group\" id=\"group-{id}\" aria-labelledby=\"group-{id}-title\">\
             <h2 id=\"group-{id}-title\"><span class=\"count\">{count}</span> identical calls, the oldest {}</h2>{}\
             <form method=\"get\" action=\"/groups/{id}/confirm\" class=\"group-decide\">\
             <input type=\"hidden\" name=\"count\" value=\"{count}\">\
             <label for=\"why-{id}\">Explanation (the model sees it)</label>\
             <input id=\"why-{id}\" name=\"explanation\" type=\"text\" maxlength=\"4000\"><div class=\"buttons\">",
            ago(now_ms - group.count.oldest),
            identity(first),
        );
        for decision in decisions(first) {
            let _ = write!(
                body,
                "<button type=\"submit\" name=\"decision\" value=\"{decision}\" class=\"btn {decision}\">\
                 {decision} all {count}…</button>"
            );
        }
        body.push_str("</div></form></section>");
    }
    shell("Airlock review: identical calls", "groups", Some(viewer), None, &body)
}

/// The confirmation of a group decision: the count now, the call, and the button.
pub fn confirm_group(viewer: &Viewer<'_>, confirmation: &GroupConfirmation<'_>) -> String {
    let GroupConfirmation { group, decision, explanation, seen } = confirmation;
    let (id, count) = (escape(&group.count.group), group.count.count);
    let changed = if *seen == count {
        String::new()
    } else {
        format!("<p class=\"error\">The group changed since you looked: it held {seen}, it holds {count} now.</p>")
    };
    let body = format!(
        "<section class=\"card confirm\" aria-labelledby=\"confirm-title\"><h1 id=\"confirm-title\">\
         {decision} <span class=\"count\">{count}</span> identical calls?</h1>{changed}{}\
         <p>Each of the {count} tasks is decided, signed and recorded on its own, with the explanation \
         “{}”.</p><form method=\"post\" action=\"/ui/groups/{id}/decision\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"decision\" value=\"{decision}\">\
         <input type=\"hidden\" name=\"explanation\" value=\"{explanation}\">\
         <input type=\"hidden\" name=\"count\" value=\"{count}\">\
         <button type=\"submit\" class=\"btn {decision}\" autofocus>Confirm: {decision} {count}</button> \
         <a href=\"/groups\">Cancel</a></form></section>",
        identity(&group.first),
        safe_html(explanation),
        decision = escape(decision),
        explanation = escape(explanation),
        csrf = escape(viewer.csrf),
    );
    shell("Airlock review: confirm", "groups", Some(viewer), None, &body)
}

/// What a group decision did: how many tasks it decided, and those it left, with why.
pub fn group_decided(viewer: &Viewer<'_>, done: &GroupDecided) -> String {
    let mut body = format!(
        "<section class=\"card\" aria-labelledby=\"done-title\"><h1 id=\"done-title\">Decided \
         <span class=\"count\">{}</span> tasks</h1>",
        done.decided.len()
    );
    if !done.refused.is_empty() {
        let _ = write!(body, "<p>{} left as they were:</p><ul>", done.refused.len());
        for refused in &done.refused {
            let _ = write!(body, "<li><code>{}</code>: {}</li>", escape(&refused.task), safe_html(&refused.error));
        }
        body.push_str("</ul>");
    }
    body.push_str("<p><a href=\"/groups\">Identical calls</a> · <a href=\"/\">Pending</a></p></section>");
    shell("Airlock review: decided", "groups", Some(viewer), None, &body)
}
