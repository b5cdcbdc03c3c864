//! The standing page: the active standing decisions of the reviewer's pools, each with a
//! Revoke button.

use std::fmt::Write as _;

use airlock_records::review::standing::StandingDecision;

use super::{Viewer, shell};
use crate::ui::{escape, safe_html, utc};

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
