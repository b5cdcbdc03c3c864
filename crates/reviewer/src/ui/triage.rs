//! The pending page's triage: the filter form (a plain `GET` form, so the filter lives in the
//! URL and a reload keeps it), the pending count of each pool, and the page of cards with its
//! pager. [`results`] is also what the page's script fetches to refresh the page it shows.

use std::fmt::Write as _;

use super::card::card;
use super::escape;
use crate::auth::Reviewer;
use crate::triage::{Filter, Page, Sort, Triage};

/// The filter form, its values those of `filter`, offering the pools of `page`'s counts (the
/// counts themselves are shown apart, where a live refresh keeps them current).
pub fn form(page: &Page, filter: &Filter) -> String {
    let mut html = String::from(
        "<form id=\"filters\" class=\"filters\" method=\"get\" action=\"/\" role=\"search\" \
         aria-label=\"Filter pending tasks\">",
    );
    let selected = |yes: bool| if yes { " selected" } else { "" };
    let _ = write!(
        html,
        "<div class=\"field\"><label for=\"f-pool\">Pool</label><select id=\"f-pool\" name=\"pool\">\
         <option value=\"\"{}>All pools</option>",
        selected(filter.pool.is_none()),
    );
    for count in &page.counts {
        let _ = write!(
            html,
            "<option value=\"{pool}\"{}>{pool}</option>",
            selected(filter.pool.as_deref() == Some(count.pool.as_str())),
            pool = escape(&count.pool),
        );
    }
    html.push_str("</select></div>");
    let text = |html: &mut String, name: &str, label: &str, kind: &str, value: Option<String>| {
        let _ = write!(
            html,
            "<div class=\"field\"><label for=\"f-{name}\">{label}</label>\
             <input id=\"f-{name}\" name=\"{name}\" type=\"{kind}\" value=\"{}\"{}></div>",
            escape(value.as_deref().unwrap_or_default()),
            if kind == "number" { " min=\"0\" inputmode=\"numeric\"" } else { " autocomplete=\"off\"" },
        );
    };
    text(&mut html, "tool", "Tool", "text", filter.tool.clone());
    text(&mut html, "run", "Run", "text", filter.run.clone());
    text(&mut html, "sample", "Sample", "text", filter.sample.clone());
    text(&mut html, "older_than", "Waiting (min) at least", "number", filter.older_than_minutes.map(|m| m.to_string()));
    text(&mut html, "q", "Search calls", "search", filter.search.clone());
    html.push_str("<div class=\"field\"><label for=\"f-sort\">Order</label><select id=\"f-sort\" name=\"sort\">");
    for sort in Sort::ALL {
        let _ = write!(
            html,
            "<option value=\"{}\"{}>{}</option>",
            sort.as_str(),
            selected(sort == filter.sort),
            sort.label()
        );
    }
    html.push_str(
        "</select></div><div class=\"actions\"><button class=\"btn primary\" type=\"submit\">Filter</button>\
         <a class=\"clear\" href=\"/\">Clear</a></div></form>",
    );
    html
}

/// The counts, the page of cards (as `reviewer` sees them) and the pager of `triage`'s `page`, within
/// `<div id="results">` (whose `data-pending` is the pending total of the caller's pools).
pub fn results(page: &Page, triage: &Triage, reviewer: &Reviewer, csrf: &str, now_ms: i64) -> String {
    let filter = &triage.filter;
    let mut html = String::with_capacity(page.tasks.len() * 4096 + 1024);
    let _ = write!(html, "<div id=\"results\" data-pending=\"{}\">", page.pending());
    html.push_str("<ul id=\"counts\" class=\"counts\" aria-label=\"Pending tasks per pool\">");
    for count in &page.counts {
        let link = Filter { pool: Some(count.pool.clone()), ..filter.clone() };
        let current = if filter.pool.as_deref() == Some(count.pool.as_str()) { " aria-current=\"true\"" } else { "" };
        let _ = write!(
            html,
            "<li><a href=\"/?{}\"{current}>{} <span class=\"n\">{}</span></a></li>",
            escape(&link.query_string(triage.limit, None)),
            escape(&count.pool),
            count.pending
        );
    }
    html.push_str("</ul>");
    let empty = if filter.narrows() {
        "No pending task matches these filters."
    } else {
        "Nothing to decide. New tasks appear here as they arrive."
    };
    let _ = write!(
        html,
        "<p id=\"empty\" class=\"empty\"{}>{empty}</p><section id=\"tasks\" aria-label=\"Pending tasks\">",
        if page.tasks.is_empty() { "" } else { " hidden" }
    );
    for task in &page.tasks {
        html.push_str(&card(task, reviewer, csrf, now_ms));
    }
    let _ = write!(
        html,
        "</section><nav id=\"pager\" class=\"pager\" aria-label=\"Pages\"><span class=\"shown\">{} shown of \
         {} matching</span>",
        page.tasks.len(),
        page.matching
    );
    if triage.cursor.is_some() {
        let _ = write!(html, "<a href=\"/?{}\">First page</a>", escape(&filter.query_string(triage.limit, None)));
    }
    if let Some(next) = &page.next {
        let _ = write!(
            html,
            "<a rel=\"next\" href=\"/?{}\">Next page</a>",
            escape(&filter.query_string(triage.limit, Some(next)))
        );
    }
    html.push_str("</nav></div>");
    html
}
