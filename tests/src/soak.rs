//! The chaos soak's checker: what a run under faults (roles and nodes killed, frozen and
//! restarted at random) must have done with every call, checked once the run has ended from
//! what the runner saw, the decision log, the reviewer's history and the broker's queues.
//!
//! - Every call was answered exactly once: decided, or failed closed at its own deadline and
//!   never later ([`Report::lost`], [`Report::early`], [`Report::late`]).
//! - No call was approved after its deadline ([`Report::approved_after_deadline`]).
//! - Each decision the runner took has exactly one audit record, and no call has two
//!   ([`Report::audit_missing`], [`Report::audit_doubled`]).
//! - No human task was decided twice ([`Report::human_doubled`]).
//! - The queues are empty at the end but for dead letters, and each of those says why
//!   ([`Report::queues_left`], [`Report::dead_without_reason`]).
//!
//! The checker is pure: the soak gathers its inputs, and [`check`] judges them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::Duration;

/// How late past its deadline a call failed closed may be answered and still count as on
/// time: the runner's timer and its scheduling on a busy machine, not a wait for the fleet.
pub const FAIL_CLOSED_SLACK: Duration = Duration::from_secs(2);

/// What the runner saw of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The call's key (`run/sample/epoch/tool call id`, or any string unique per call).
    pub call: String,
    /// The call's deadline, from when it was sent.
    pub deadline: Duration,
    /// When the runner sent it, in milliseconds since the run started.
    pub sent_ms: u64,
    /// Every answer the caller got for it: one, if all is well.
    pub answers: Vec<Answer>,
}

/// One answer a caller got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// When, in milliseconds since the run started.
    pub at_ms: u64,
    /// The decision's name (`approve`, `reject`, `terminate`, …).
    pub decision: String,
    /// Whether the runner failed it closed at its deadline (approver `timeout`) rather than
    /// the fleet deciding it.
    pub failed_closed: bool,
    /// The decision's id (empty for one failed closed: the fleet made none).
    pub decision_id: String,
    /// When the fleet decided it, in milliseconds since the run started (the decision's
    /// `decided_at`), if the fleet did.
    pub decided_ms: Option<u64>,
}

/// One record of the decision log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The call's key, as in [`Asked::call`].
    pub call: String,
    /// The decision's id.
    pub decision_id: String,
}

/// One human task of the reviewer's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanTask {
    /// The call's key, as in [`Asked::call`].
    pub call: String,
    /// Whether a person decided it (rather than its timeout or a cancel).
    pub decided: bool,
}

/// A message left in a queue at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// The queue.
    pub queue: String,
    /// The message's `x-airlock-reason`, for a dead letter.
    pub reason: Option<String>,
}

/// Everything the soak gathered once the run had ended.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Every call the runner sent.
    pub asked: Vec<Asked>,
    /// The decision log.
    pub audit: Vec<AuditRecord>,
    /// The reviewer's history.
    pub human: Vec<HumanTask>,
    /// What was left in the fleet's queues.
    pub leftovers: Vec<Leftover>,
    /// The fleet's dead-letter queue's name.
    pub dead_queue: String,
}

/// What the checker found, one count per rule, and the first few calls of each for the
/// message of a failing soak. A clean run has every count 0 ([`Report::is_clean`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Calls sent.
    pub calls: usize,
    /// Calls the fleet decided.
    pub decided: usize,
    /// Calls failed closed at their deadline.
    pub failed_closed: usize,
    /// Calls with no answer.
    pub lost: usize,
    /// Calls with more than one answer.
    pub doubled: usize,
    /// Calls failed closed before their deadline.
    pub early: usize,
    /// Calls answered (decided or failed closed) later than their deadline and the slack.
    pub late: usize,
    /// Calls approved by a decision made after their deadline.
    pub approved_after_deadline: usize,
    /// Decisions taken by the runner with no audit record.
    pub audit_missing: usize,
    /// Calls with more than one audit record, or a record of another decision than the one
    /// the runner took.
    pub audit_doubled: usize,
    /// Calls whose human task a person decided more than once.
    pub human_doubled: usize,
    /// Messages left in a queue other than the dead-letter queue.
    pub queues_left: usize,
    /// Dead letters with no reason.
    pub dead_without_reason: usize,
    /// A few calls (or queues) of each rule broken, by rule.
    pub examples: BTreeMap<&'static str, Vec<String>>,
}

/// How many examples a rule keeps.
const EXAMPLES: usize = 5;

impl Report {
    /// Whether no rule was broken.
    pub fn is_clean(&self) -> bool {
        self.examples.is_empty()
    }

    fn broke(&mut self, rule: &'static str, what: &str) {
        let examples = self.examples.entry(rule).or_default();
        if examples.len() < EXAMPLES {
            examples.push(what.to_owned());
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls: {} decided, {} failed closed; {} lost, {} doubled, {} early, {} late, \
             {} approved after their deadline; audit: {} missing, {} doubled; {} human tasks \
             decided twice; {} messages left, {} dead letters without a reason",
            self.calls,
            self.decided,
            self.failed_closed,
            self.lost,
            self.doubled,
            self.early,
            self.late,
            self.approved_after_deadline,
            self.audit_missing,
            self.audit_doubled,
            self.human_doubled,
            self.queues_left,
            self.dead_without_reason,
        )?;
        for (rule, examples) in &self.examples {
            write!(f, "\n  {rule}: {}", examples.join(", "))?;
        }
        Ok(())
    }
}

/// Judges `run` by every rule of the module documentation.
pub fn check(run: &Run) -> Report {
    let mut report = Report { calls: run.asked.len(), ..Report::default() };
    let mut audit: HashMap<&str, Vec<&str>> = HashMap::new();
    for record in &run.audit {
        audit.entry(record.call.as_str()).or_default().push(record.decision_id.as_str());
    }
    for asked in &run.asked {
        check_call(asked, audit.get(asked.call.as_str()).map(Vec::as_slice).unwrap_or_default(), &mut report);
    }
    // Audit records of calls the runner never sent are doubled work of someone else's.
    let sent: HashSet<&str> = run.asked.iter().map(|asked| asked.call.as_str()).collect();
    for call in audit.keys().filter(|call| !sent.contains(*call)) {
        report.audit_doubled += 1;
        report.broke("audit record of a call never sent", call);
    }
    let mut decided_tasks: HashMap<&str, usize> = HashMap::new();
    for task in run.human.iter().filter(|task| task.decided) {
        *decided_tasks.entry(task.call.as_str()).or_default() += 1;
    }
    for (call, _) in decided_tasks.iter().filter(|(_, count)| **count > 1) {
        report.human_doubled += 1;
        report.broke("human task decided twice", call);
    }
    for leftover in &run.leftovers {
        if leftover.queue != run.dead_queue {
            report.queues_left += 1;
            report.broke("message left in a queue", &leftover.queue);
        } else if leftover.reason.as_deref().is_none_or(str::is_empty) {
            report.dead_without_reason += 1;
            report.broke("dead letter without a reason", &leftover.queue);
        }
    }
    report
}

/// One call's rules: answered once, on time, approved only in time, audited once.
fn check_call(asked: &Asked, audit: &[&str], report: &mut Report) {
    let call = asked.call.as_str();
    let Some(answer) = asked.answers.first() else {
        report.lost += 1;
        report.broke("lost", call);
        return;
    };
    if asked.answers.len() > 1 {
        report.doubled += 1;
        report.broke("answered more than once", call);
    }
    let due = asked.sent_ms + millis(asked.deadline);
    if answer.at_ms > due + millis(FAIL_CLOSED_SLACK) {
        report.late += 1;
        report.broke("answered after its deadline", call);
    }
    if answer.failed_closed {
        report.failed_closed += 1;
        if answer.at_ms < due {
            report.early += 1;
            report.broke("failed closed before its deadline", call);
        }
        // A decision the fleet made too late is dropped, never recorded against the call.
        if !audit.is_empty() {
            report.audit_doubled += 1;
            report.broke("audit record of a call failed closed", call);
        }
        return;
    }
    report.decided += 1;
    if answer.decision == "approve" && answer.decided_ms.is_some_and(|decided| decided > due) {
        report.approved_after_deadline += 1;
        report.broke("approved after its deadline", call);
    }
    match audit {
        [] => {
            report.audit_missing += 1;
            report.broke("decision with no audit record", call);
        }
        [one] if *one == answer.decision_id => {}
        records => {
            report.audit_doubled += 1;
            // Which it is tells where to look: the auditor writing a delivery twice, or the
            // fleet deciding a repeated request again.
            let distinct: HashSet<&&str> = records.iter().collect();
            let rule = match (records.len(), distinct.len()) {
                (1, _) => "an audit record of another decision than the one taken",
                (_, 1) => "one decision recorded more than once",
                _ => "a call decided more than once, each decision recorded",
            };
            report.broke(rule, call);
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
