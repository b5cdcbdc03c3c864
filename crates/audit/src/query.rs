//! `airlock audit query`: the records of a decision log that match every filter given,
//! printed as they are in the file.

use std::io::{self, BufRead, Write};

use airlock_records::view::DecisionRecord;

/// Filters on a decision log; an unset filter matches every record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Decisions of this sample (`key.sample_id`).
    pub sample: Option<String>,
    /// Decisions of this run (`key.run_id`).
    pub run: Option<String>,
    /// Decisions this reviewer, worker or plugin made or answered in the trail.
    pub decided_by: Option<String>,
    /// Decisions made under this policy digest.
    pub digest: Option<String>,
}

/// A log that cannot be queried.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Reading the log or writing the answer failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A line is not a decision record.
    #[error("line {line}: a bad record: {message}")]
    BadRecord {
        /// The line, from 1.
        line: usize,
        /// The parser's message.
        message: String,
    },
}

impl Query {
    /// Whether `record` passes every filter.
    pub fn matches(&self, record: &DecisionRecord) -> bool {
        let wanted = |filter: &Option<String>, value: &str| filter.as_deref().is_none_or(|f| f == value);
        wanted(&self.sample, &record.key.sample_id)
            && wanted(&self.run, &record.key.run_id)
            && wanted(&self.digest, &record.decision.policy_digest)
            && self.decided_by.as_deref().is_none_or(|who| record.decision.involves(who))
    }

    /// Writes the lines of `log` that match to `out`, unchanged; returns how many.
    /// Blank lines are passed over, and so are torn ones (a record cut short by an auditor
    /// killed while writing it, whose decision the log holds again on a later line), with a
    /// warning; any other line that is not a record fails the query.
    pub fn run(&self, log: impl BufRead, mut out: impl Write) -> Result<usize, QueryError> {
        let mut matched = 0;
        for (index, line) in log.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let record: DecisionRecord = match serde_json::from_str(&line) {
                Ok(record) => record,
                Err(e) if e.is_eof() => {
                    tracing::warn!(line = index + 1, "A torn record (cut short as it was written) is passed over.");
                    continue;
                }
                Err(e) => return Err(QueryError::BadRecord { line: index + 1, message: e.to_string() }),
            };
            if self.matches(&record) {
                writeln!(out, "{line}")?;
                matched += 1;
            }
        }
        Ok(matched)
    }
}

#[cfg(test)]
mod tests {
    use airlock_contract::v1;

    use super::*;

    fn line(sample: &str, digest: &str, trail_by: &str) -> String {
        let decision = v1::Decision {
            decision_id: format!("{sample}-{digest}-{trail_by}"),
            key: Some(v1::CallKey {
                run_id: "r1".into(),
                sample_id: sample.into(),
                epoch: 1,
                tool_call_id: "c".into(),
                ..Default::default()
            }),
            decision: v1::DecisionKind::Approve.into(),
            trail: vec![v1::StepAnswer { approver: "s".into(), decided_by: trail_by.into(), ..Default::default() }],
            policy_digest: digest.into(),
            decided_by: "worker".into(),
            ..Default::default()
        };
        serde_json::to_string(&DecisionRecord::from_wire(&decision)).unwrap()
    }

    fn count(query: &Query, log: &str) -> usize {
        let mut out = Vec::new();
        let matched = query.run(log.as_bytes(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), matched);
        matched
    }

    #[test]
    fn every_filter_given_must_match() {
        let log =
            [line("s0", "d1", "alice"), String::new(), line("s1", "d1", "bob"), line("s0", "d2", "bob")].join("\n");
        assert_eq!(count(&Query::default(), &log), 3);
        assert_eq!(count(&Query { sample: Some("s0".into()), ..Query::default() }, &log), 2);
        assert_eq!(count(&Query { run: Some("r2".into()), ..Query::default() }, &log), 0);
        let bob_d1 = Query { decided_by: Some("bob".into()), digest: Some("d1".into()), ..Query::default() };
        assert_eq!(count(&bob_d1, &log), 1);
        assert_eq!(count(&Query { decided_by: Some("worker".into()), ..Query::default() }, &log), 3);
    }

    #[test]
    fn a_torn_record_is_passed_over() {
        let whole = line("s0", "d1", "alice");
        let log = [whole[..whole.len() / 2].to_owned(), whole.clone(), line("s1", "d1", "bob")].join("\n");
        assert_eq!(count(&Query::default(), &log), 2);
        assert_eq!(count(&Query { sample: Some("s0".into()), ..Query::default() }, &log), 1);
    }

    #[test]
    fn a_line_that_is_no_record_fails_with_its_number() {
        let log = format!("{}\n{{\"decision\": 3}}\n", line("s", "d", "w"));
        let error = Query::default().run(log.as_bytes(), io::sink()).unwrap_err();
        assert!(error.to_string().starts_with("line 2: a bad record"), "{error}");
    }
}
