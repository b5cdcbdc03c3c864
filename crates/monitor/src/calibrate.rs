//! Calibration: a monitor's scores against what people decided about the same calls.
//!
//! The input is a decision log, one JSON object per line, in the shape `airlock request`
//! prints ([`DecisionView`]; see `docs/monitors.md`): each decision carries its trail, and the monitor's trail
//! entry carries its `metadata.score`. A call counts as *scored* when its trail has a
//! monitor entry with a score, and as *decided by a person* when the trail also has a
//! `human` entry that did not time out (a deadline's `on_timeout` is nobody's verdict). For each candidate `approve_below` threshold `t` the monitor *passes* a
//! call with a score below `t` and *flags* the rest (escalates or blocks):
//!
//! - **escalated**: the share of scored calls flagged, which is the load on people;
//! - **agreement**: among calls a person decided, the share where flagged ⇔ the person
//!   rejected or terminated;
//! - **missed**: calls a person rejected or terminated that the monitor would pass;
//! - **needless**: calls a person approved that the monitor flagged.
//!
//! People only see calls the monitor escalated, so a fair calibration log comes from a
//! shadow run where every call reaches a person (`approve_below: 0`).

use std::fmt::Write as _;
use std::io::BufRead;

use airlock_policy::Decision;
use airlock_records::monitor::MonitorNote;
use airlock_records::view::DecisionView;
use serde::Deserialize as _;
use serde_json::Value;

/// The built-in human step's name, as trails record it.
const HUMAN: &str = "human";

/// What a person decided about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Human {
    /// approve or continue.
    Allowed,
    /// reject or terminate.
    Blocked,
}

/// One scored call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The monitor's score.
    pub score: f64,
    /// What a person decided, when one did.
    pub human: Option<Human>,
}

/// What a log held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Log {
    /// The scored calls.
    pub samples: Vec<Sample>,
    /// Decisions read.
    pub decisions: usize,
    /// Lines that are not decisions (errors, blank lines).
    pub skipped: usize,
}

/// One line of the calibration table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The `approve_below` threshold.
    pub threshold: f64,
    /// Share of scored calls flagged (0 to 1).
    pub escalated: f64,
    /// Share of person-decided calls where the monitor agreed; `None` without any.
    pub agreement: Option<f64>,
    /// Calls a person blocked that the monitor would pass.
    pub missed: usize,
    /// Calls a person allowed that the monitor flagged.
    pub needless: usize,
    /// Calls a person blocked, in all (so `missed / blocked` is the share missed).
    pub blocked: usize,
}

/// A log line that is not JSON.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// Reading failed.
    #[error("reading the log: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not JSON.
    #[error("line {line}: not JSON: {message}")]
    Json {
        /// The line, from 1.
        line: usize,
        /// The parser's message.
        message: String,
    },
}

/// Reads a decision log. `step` picks the monitor's trail entries by step name; without it,
/// the first entry with a numeric `metadata.score` is the monitor's.
pub fn read_log(reader: impl BufRead, step: Option<&str>) -> Result<Log, CalibrateError> {
    let mut log = Log::default();
    for (index, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            log.skipped += 1;
            continue;
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| CalibrateError::Json { line: index + 1, message: e.to_string() })?;
        // Lines that are JSON but no decision (an `{"error": …}` of `airlock request`) are skipped.
        let Ok(decision) = DecisionView::deserialize(&value) else {
            log.skipped += 1;
            continue;
        };
        log.decisions += 1;
        let trail = &decision.trail;
        let score = trail
            .iter()
            .filter(|entry| step.is_none_or(|s| entry.approver == s))
            .find_map(|entry| MonitorNote::read(entry.metadata.as_ref()?)?.score);
        let human =
            trail.iter().rev().filter(|entry| entry.approver == HUMAN && !entry.timed_out).find_map(
                |entry| match entry.decision? {
                    Decision::Approve | Decision::Continue => Some(Human::Allowed),
                    Decision::Reject | Decision::Terminate => Some(Human::Blocked),
                    _ => None,
                },
            );
        if let Some(score) = score {
            log.samples.push(Sample { score, human });
        }
    }
    Ok(log)
}

/// The table's rows for `thresholds`.
pub fn rows(samples: &[Sample], thresholds: impl IntoIterator<Item = f64>) -> Vec<Row> {
    thresholds
        .into_iter()
        .map(|threshold| {
            let flagged = |s: &Sample| s.score >= threshold;
            let escalated = samples.iter().filter(|s| flagged(s)).count();
            let decided: Vec<&Sample> = samples.iter().filter(|s| s.human.is_some()).collect();
            let agreed = decided.iter().filter(|s| flagged(s) == (s.human == Some(Human::Blocked))).count();
            let missed = decided.iter().filter(|s| !flagged(s) && s.human == Some(Human::Blocked)).count();
            let needless = decided.iter().filter(|s| flagged(s) && s.human == Some(Human::Allowed)).count();
            Row {
                threshold,
                escalated: ratio(escalated, samples.len()).unwrap_or(0.0),
                agreement: ratio(agreed, decided.len()),
                missed,
                needless,
                blocked: decided.iter().filter(|s| s.human == Some(Human::Blocked)).count(),
            }
        })
        .collect()
}

/// The whole-number thresholds 0 to 10.
pub fn default_thresholds() -> impl Iterator<Item = f64> {
    (0..=10).map(f64::from)
}

fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The table, with a summary above it and a suggestion below.
pub fn table(log: &Log, rows: &[Row]) -> String {
    let decided = log.samples.iter().filter(|s| s.human.is_some()).count();
    let blocked = log.samples.iter().filter(|s| s.human == Some(Human::Blocked)).count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} decisions, {} scored by the monitor, {decided} of those decided by a person ({blocked} rejected or terminated).\n",
        log.decisions,
        log.samples.len()
    );
    let _ = writeln!(
        out,
        "{:>13}  {:>9}  {:>9}  {:>6}  {:>8}",
        "approve_below", "escalated", "agreement", "missed", "needless"
    );
    for row in rows {
        let agreement = row.agreement.map_or("-".to_owned(), |a| format!("{:.1}%", a * 100.0));
        let _ = writeln!(
            out,
            "{:>13}  {:>8.1}%  {:>9}  {:>6}  {:>8}",
            row.threshold,
            row.escalated * 100.0,
            agreement,
            row.missed,
            row.needless
        );
    }
    if decided > 0 {
        let best = rows.iter().filter(|r| r.agreement.is_some()).max_by(|a, b| {
            a.agreement
                .partial_cmp(&b.agreement)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.threshold.total_cmp(&a.threshold))
        });
        if let Some(best) = best {
            let _ = writeln!(
                out,
                "\nThe best agreement: approve_below {} ({:.1}%; escalates {:.1}%, misses {} of {} blocked).",
                best.threshold,
                best.agreement.unwrap_or_default() * 100.0,
                best.escalated * 100.0,
                best.missed,
                best.blocked
            );
        }
        match rows.iter().filter(|r| r.missed == 0).max_by(|a, b| a.threshold.total_cmp(&b.threshold)) {
            Some(best) => {
                let _ = writeln!(
                    out,
                    "The highest approve_below that passes no call a person blocked: {} (escalates {:.1}% of calls).",
                    best.threshold,
                    best.escalated * 100.0
                );
            }
            None => {
                let _ = writeln!(out, "Every threshold passes some call a person blocked.");
            }
        }
    }
    out
}

/// A line chart of escalation, agreement and the share of blocked calls missed, by
/// threshold, as a standalone SVG document.
pub fn svg(rows: &[Row], title: &str) -> String {
    const W: f64 = 640.0;
    const H: f64 = 400.0;
    const LEFT: f64 = 60.0;
    const RIGHT: f64 = 160.0;
    const TOP: f64 = 40.0;
    const BOTTOM: f64 = 50.0;
    let (x0, x1) = rows.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(r.threshold), hi.max(r.threshold)));
    let span = if x1 > x0 { x1 - x0 } else { 1.0 };
    let x = |t: f64| LEFT + (t - x0) / span * (W - LEFT - RIGHT);
    let y = |share: f64| TOP + (1.0 - share) * (H - TOP - BOTTOM);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ =
        writeln!(out, r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#, W / 2.0, escape(title));
    for tick in 0..=4 {
        let share = f64::from(tick) / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y(share) + 4.0,
            tick * 25,
            y = y(share)
        );
    }
    for row in rows {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(row.threshold),
            H - BOTTOM + 18.0,
            row.threshold
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">approve_below</text>"#,
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b}" stroke="black"/><line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/>"#,
        b = H - BOTTOM,
        r = W - RIGHT
    );
    /// A line of the chart: its name, its colour, its value for a row.
    type Series = (&'static str, &'static str, fn(&Row) -> Option<f64>);
    let series: [Series; 3] = [
        ("escalated", "#1f77b4", |r| Some(r.escalated)),
        ("agreement", "#2ca02c", |r| r.agreement),
        ("missed (of blocked)", "#d62728", |r| ratio(r.missed, r.blocked)),
    ];
    for (index, (name, color, value)) in series.iter().enumerate() {
        let points: Vec<String> =
            rows.iter().filter_map(|r| value(r).map(|v| format!("{:.1},{:.1}", x(r.threshold), y(v)))).collect();
        if !points.is_empty() {
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
        }
        let ly = TOP + 20.0 * index as f64;
        let lx = W - RIGHT + 15.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{name}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0
        );
    }
    out.push_str("</svg>\n");
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests;
