//! The standing page (the active standing decisions of the reviewer's pools, each with a
//! Revoke button) and the card's "every identical call" form.

use std::fmt::Write as _;

use airlock_records::review::standing::StandingDecision;

use super::{Viewer, shell, utc};
use crate::standing::{exact_pattern, standing_may_decide};
use crate::task::Task;
use crate::ui::{escape, safe_html};

/// How long a standing decision may last, as the card offers it: seconds and label.
const DURATIONS: [(u64, &str); 4] =
    [(900, "15 minutes"), (3600, "1 hour"), (8 * 3600, "8 hours"), (24 * 3600, "24 hours")];

/// The active standing decisions, newest first, each with a Revoke button.
pub fn standing(viewer: &Viewer<'_>, standing: &[StandingDecision]) -> String {
    let mut body = String::from("<div class=\"bar\"><h1>Standing decisions</h1></div>");
    if standing.is_empty() {
        body.push_str(
            "<p class=\"empty\">No standing decisions. Answer a task for every identical call to make one.</p>",
        );
        return shell("Airlock review: standing decisions", "standing", Some(viewer), None, &body);
    }
    body.push_str(
        "<table class=\"history standing\"><thead><tr><th>#</th><th>By</th><th>Pool</th><th>Kind</th>\
         <th>Where</th><th>Calls matching</th><th>Decision</th><th>Until</th><th>Revoke</th></tr></thead><tbody>",
    );
    for s in standing {
        let _ = write!(
            body,
            "<tr id=\"standing-{id}\"><td>{id}</td><td>{author}</td><td>{pool}</td><td>{kind}</td><td>{scope}</td>\
             <td><code class=\"pattern\">{pattern}</code></td><td><span class=\"badge {d}\">{d}</span></td>\
             <td class=\"nowrap\">{until}</td><td><form method=\"post\" action=\"/ui/standing/{id}/revoke\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button class=\"btn revoke\" type=\"submit\" \
             aria-label=\"Revoke standing decision {id}\">Revoke</button></form></td></tr>",
            id = s.id,
            author = safe_html(&s.author),
            pool = safe_html(&s.pool),
            kind = s.kind,
            scope = safe_html(&s.scope.to_string()),
            pattern = safe_html(&s.pattern),
            d = s.decision,
            until = utc(s.expires_at_unix_ms),
            csrf = escape(viewer.csrf),
        );
    }
    body.push_str("</tbody></table>");
    shell("Airlock review: standing decisions", "standing", Some(viewer), None, &body)
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
