//! The Runs page, for admins: the runs under control as the control log made them (the switch
//! thrown by hand, who threw it and why, the incidents marked), each with its switches, and a
//! form to switch any run by its id.

use std::fmt::Write as _;

use airlock_records::review::control::{RunList, RunView};

use super::{Viewer, shell};
use crate::desk::control::RunAction;
use crate::ui::{escape, safe_html};

/// The runs under control, each with Pause, Resume and Terminate, after a form for any run.
pub fn runs(viewer: &Viewer<'_>, runs: &RunList) -> String {
    let csrf = escape(viewer.csrf);
    let mut body = String::from("<div class=\"bar\"><h1>Runs under control</h1></div>");
    let _ = write!(
        body,
        "<form class=\"switch\" method=\"post\" action=\"/ui/runs\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label><span>Run</span><input name=\"run\" required autocomplete=\"off\" spellcheck=\"false\"></label>\
         <label><span>Tenant <i>(optional)</i></span><input name=\"tenant\" autocomplete=\"off\" spellcheck=\"false\"></label>\
         <label><span>Reason</span><input name=\"reason\" maxlength=\"4000\" autocomplete=\"off\"></label>\
         <label><span>Pool <i>(pause only)</i></span><input name=\"pool\" autocomplete=\"off\" spellcheck=\"false\"></label>\
         <div class=\"choices\">{}</div></form>",
        buttons(),
    );
    if runs.runs.is_empty() {
        body.push_str("<p class=\"empty\">No run is under control: no switch thrown by hand, no incident marked.</p>");
        return shell("Airlock review: runs", "runs", Some(viewer), None, &body);
    }
    body.push_str(
        "<table class=\"history runs\"><thead><tr><th>Run</th><th>Tenant</th><th>Switch</th><th>By</th>\
         <th>Reason</th><th>Incidents</th><th>Switch it</th></tr></thead><tbody>",
    );
    for run in &runs.runs {
        body.push_str(&row(run, &csrf));
    }
    body.push_str("</tbody></table>");
    shell("Airlock review: runs", "runs", Some(viewer), None, &body)
}

/// One run's row: its switch and incidents, and its own form.
fn row(run: &RunView, csrf: &str) -> String {
    let (switch, by, reason) = match &run.switch {
        Some(s) => {
            let target = s.pool.as_deref().or(s.policy.as_deref()).map(|t| format!(" ({})", safe_html(t)));
            (
                format!("<span class=\"badge {0}\">{0}</span>{1}", escape(&s.response), target.unwrap_or_default()),
                safe_html(&s.by),
                safe_html(&s.reason),
            )
        }
        None => ("<span class=\"badge withdrawn\">none</span>".to_owned(), String::new(), String::new()),
    };
    let marked: Vec<String> = run.incidents.iter().map(|id| format!("<code>{}</code>", safe_html(id))).collect();
    let incidents = match marked.len() {
        0 => "0".to_owned(),
        n => format!("{n}: {}", marked.join(", ")),
    };
    format!(
        "<tr><td><code>{run_id}</code></td><td>{tenant}</td><td>{switch}</td><td>{by}</td><td class=\"why\">{reason}</td>\
         <td class=\"why\">{incidents}</td><td><form method=\"post\" action=\"/ui/runs\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"run\" value=\"{run}\">\
         <input type=\"hidden\" name=\"tenant\" value=\"{tenant_value}\">\
         <input name=\"reason\" maxlength=\"4000\" placeholder=\"reason\" aria-label=\"Reason for run {run}\">\
         <div class=\"choices\">{buttons}</div></form></td></tr>",
        run_id = safe_html(&run.run_id),
        tenant = safe_html(&run.tenant),
        run = escape(&run.run_id),
        tenant_value = escape(&run.tenant),
        buttons = buttons(),
    )
}

/// A submit button per switch.
fn buttons() -> String {
    RunAction::ALL
        .iter()
        .map(|action| {
            let (name, class) = match action {
                RunAction::Pause => ("Pause", "escalate"),
                RunAction::Resume => ("Resume", "approve"),
                RunAction::Terminate => ("Terminate", "terminate"),
            };
            format!(
                "<button type=\"submit\" name=\"action\" value=\"{}\" class=\"btn small {class}\">{name}</button>",
                action.as_str()
            )
        })
        .collect()
}
