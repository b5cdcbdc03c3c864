//! The table `airlock demo` ends with: decisions by kind and by deciding step, and latency
//! percentiles.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use airlock_contract::v1;
use airlock_policy::render::format_function_call;
use airlock_policy::{Call, Kind};
use airlock_records::convert::decision_from_wire;

/// One decision the simulated runner received.
#[derive(Debug, Clone)]
pub struct Record {
    kind: Kind,
    decision: &'static str,
    approver: String,
    latency: Duration,
}

impl Record {
    /// Records `decision`, received `latency` after asking.
    pub fn new(kind: Kind, decision: &v1::Decision, latency: Duration) -> Self {
        Record {
            kind,
            decision: decision_from_wire(decision.decision).map_or("unspecified", |d| d.as_str()),
            approver: if decision.approver.is_empty() { "(no step matched)".into() } else { decision.approver.clone() },
            latency,
        }
    }
}

/// One line for a decision: the call, what was decided, by whom, and why.
pub fn describe(call: &Call, decision: &v1::Decision) -> String {
    let mut rendered = format_function_call(call).replace('\n', "\\n");
    if rendered.chars().count() > 56 {
        rendered = rendered.chars().take(55).collect::<String>() + "…";
    }
    let what = decision_from_wire(decision.decision).map_or("unspecified", |d| d.as_str());
    let by = if decision.approver.is_empty() { "no step matched" } else { decision.approver.as_str() };
    let why = decision.explanation.as_deref().unwrap_or("");
    format!("{rendered:<56} -> {what} by {by}: {why}")
}

/// Every record of a run.
#[derive(Debug, Default)]
pub struct Summary {
    records: Vec<Record>,
}

impl Summary {
    /// Adds records.
    pub fn extend(&mut self, records: impl IntoIterator<Item = Record>) {
        self.records.extend(records);
    }

    /// The summary as text.
    pub fn render(&self, elapsed: Duration) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "\n{} decisions in {:.2}s\n", self.records.len(), elapsed.as_secs_f64());
        for kind in [Kind::Approval, Kind::Review] {
            let records: Vec<&Record> = self.records.iter().filter(|r| r.kind == kind).collect();
            if records.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{kind} decisions ({})", records.len());
            let _ = writeln!(out, "  {:<28} {:<10} {:>5}", "deciding step", "decision", "count");
            let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
            for record in &records {
                *counts.entry((record.approver.as_str(), record.decision)).or_default() += 1;
            }
            for ((approver, decision), count) in counts {
                let _ = writeln!(out, "  {approver:<28} {decision:<10} {count:>5}");
            }
            let mut latencies: Vec<Duration> = records.iter().map(|r| r.latency).collect();
            latencies.sort_unstable();
            let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
            let _ = writeln!(
                out,
                "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}\n",
                at(0.5),
                at(0.9),
                at(0.99),
                at(1.0)
            );
        }
        out
    }
}
