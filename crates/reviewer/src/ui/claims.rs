//! A pending task's claim on its card: who holds it and until when, what that means for the
//! person looking, and the Claim (or Extend) and Release buttons.

use std::fmt::Write as _;

use super::{escape, safe_html, utc};
use crate::auth::Reviewer;
use crate::desk::claims::held_by_another;
use crate::task::Task;

/// Whether `reviewer`, looking at pending `task`, is kept from deciding it: another reviewer
/// claims it and `reviewer` holds no override of its pool.
pub fn kept_from(task: &Task, reviewer: &Reviewer) -> bool {
    held_by_another(task, &reviewer.name).is_some() && !reviewer.overrides(&task.pool)
}

/// The claim of pending `task` as `reviewer` sees it, within `<div class="claim"
/// id="claim-{id}" data-held="none|you|other">` (the decide buttons it disables point to it),
/// with the buttons `reviewer` may use.
pub fn claim(task: &Task, reviewer: &Reviewer, csrf: &str) -> String {
    let id = escape(&task.id);
    let until = |ms: i64| {
        let full = utc(ms);
        // `YYYY-MM-DD HH:MM:SS UTC`: the clock to the minute, the full time on hover.
        let short = full.get(11..16).map_or_else(|| full.clone(), |clock| format!("{clock} UTC"));
        format!("<time data-until=\"{ms}\" title=\"{full}\">{short}</time>")
    };
    let button = |action: &str, label: &str| {
        format!(
            "<form class=\"claim\" method=\"post\" action=\"/ui/tasks/{id}/{action}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button type=\"submit\" class=\"btn small {action}\">{label}</button></form>",
            csrf = escape(csrf),
        )
    };
    let (held, text, buttons) = match (&task.claim, held_by_another(task, &reviewer.name)) {
        (None, _) => ("none", String::new(), button("claim", "Claim")),
        (Some(own), None) => (
            "you",
            format!("You claim this task until {}.", until(own.until_unix_ms)),
            button("claim", "Extend") + &button("release", "Release"),
        ),
        (Some(_), Some(other)) if reviewer.overrides(&task.pool) => (
            "other",
            format!(
                "Claimed by <b>{by}</b> until {}. You hold the pool's override: a decision of yours is \
                 recorded as over {by}'s claim.",
                until(other.until_unix_ms),
                by = safe_html(&other.by),
            ),
            button("release", "Release"),
        ),
        (Some(_), Some(other)) => (
            "other",
            format!(
                "Claimed by <b>{by}</b> until {}: only {by}, or a reviewer holding the pool's override, may \
                 decide it.",
                until(other.until_unix_ms),
                by = safe_html(&other.by),
            ),
            String::new(),
        ),
    };
    let mut html = String::with_capacity(512);
    let _ = write!(html, "<div class=\"claim\" id=\"claim-{id}\" data-held=\"{held}\">");
    if !text.is_empty() {
        let _ = write!(html, "<p class=\"claimed\">{text}</p>");
    }
    let _ = write!(html, "{buttons}</div>");
    html
}
