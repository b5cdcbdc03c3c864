//! The Canaries page, for admins: the catch rates of the admin's pools, per pool and per
//! reviewer, then the newest canaries with why each is bad and every answer given to it.

use std::fmt::Write as _;

use airlock_records::review::Settled;
use airlock_records::review::canary::{CanaryReport, Outcome};

use super::{Viewer, shell};
use crate::ui::{safe_html, utc};

/// The catch rates, then the newest canaries.
pub fn canaries(viewer: &Viewer<'_>, report: &CanaryReport) -> String {
    let mut body = String::from("<div class=\"bar\"><h1>Canaries</h1></div>");
    if report.pools.is_empty() {
        body.push_str("<p class=\"empty\">No canary planted in your pools yet.</p>");
        return shell("Airlock review: canaries", "canaries", Some(viewer), None, &body);
    }
    let pools = report.pools.iter().map(|pool| {
        let counts = [pool.planted, pool.answered, pool.caught, pool.missed, pool.expired, pool.pending];
        [safe_html(&pool.pool)].into_iter().chain(counts.map(|n| n.to_string())).chain([percent(pool.catch_rate)])
    });
    let heads = ["Pool", "Planted", "Answered", "Caught", "Missed", "Expired", "Pending", "Catch rate"];
    table(&mut body, "Per pool", &heads, pools);
    let reviewers = report.reviewers.iter().map(|reviewer| {
        let counts = [reviewer.answered, reviewer.caught, reviewer.missed, reviewer.by_standing];
        [safe_html(&reviewer.reviewer)]
            .into_iter()
            .chain(counts.map(|n| n.to_string()))
            .chain([percent(reviewer.catch_rate)])
    });
    let heads = ["Reviewer", "Answered", "Caught", "Missed", "By standing decisions", "Catch rate"];
    table(&mut body, "Per reviewer", &heads, reviewers);
    body.push_str(
        "<h2>Newest canaries</h2><table class=\"history canaries\"><thead><tr><th>Planted</th>\
         <th>Pool</th><th>Canary</th><th>Why it is bad</th><th>Outcome</th><th>Answers</th></tr></thead><tbody>",
    );
    for canary in &report.canaries {
        let outcome = canary.outcome.as_str();
        let mut answers: Vec<String> = canary
            .answers
            .iter()
            .map(|a| {
                let standing = a.standing.map(|id| format!(" (standing #{id})")).unwrap_or_default();
                format!("{} {}{standing}, {}", safe_html(&a.reviewer), a.decision, utc(a.at_unix_ms))
            })
            .collect();
        if let (Outcome::Expired, Some(Settled::Decided { decided_at_unix_ms, .. })) = (canary.outcome, &canary.settled)
        {
            answers.push(format!("nobody before the deadline, {}", utc(*decided_at_unix_ms)));
        }
        let _ = write!(
            body,
            "<tr><td class=\"nowrap\">{}</td><td>{}</td><td>{}</td><td class=\"why\">{}</td>\
             <td><span class=\"badge {outcome}\">{outcome}</span></td><td>{}</td></tr>",
            utc(canary.planted_at_unix_ms),
            safe_html(&canary.pool),
            safe_html(&canary.name),
            safe_html(&canary.explanation),
            answers.join("<br>"),
        );
    }
    body.push_str("</tbody></table>");
    shell("Airlock review: canaries", "canaries", Some(viewer), None, &body)
}

/// Appends a table titled `title` with the column `heads` and the `rows` of cells (HTML).
fn table<Row: IntoIterator<Item = String>>(
    body: &mut String,
    title: &str,
    heads: &[&str],
    rows: impl Iterator<Item = Row>,
) {
    let _ = write!(body, "<h2>{title}</h2><table class=\"history canaries\"><thead><tr>");
    heads.iter().for_each(|head| {
        let _ = write!(body, "<th>{head}</th>");
    });
    body.push_str("</tr></thead><tbody>");
    for row in rows {
        body.push_str("<tr>");
        row.into_iter().for_each(|cell| {
            let _ = write!(body, "<td>{cell}</td>");
        });
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table>");
}

/// A share as a percentage, or a dash without one.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "–".to_owned(), |share| format!("{:.1}%", share * 100.0))
}
