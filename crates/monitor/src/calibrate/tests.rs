use serde_json::json;

use super::*;

/// A decision line as `airlock request` prints it: a monitor entry, then maybe a person's.
fn line(score: Option<f64>, human: Option<&str>) -> String {
    let mut trail = Vec::new();
    if let Some(score) = score {
        trail.push(json!({
            "approver": "monitor", "decision": "escalate", "explanation": "x", "decided_by": "m/gpt",
            "metadata": {"score": score, "reason": "r", "model": "gpt"}
        }));
    }
    if let Some(decision) = human {
        trail.push(json!({"approver": "human", "decision": decision, "explanation": null, "decided_by": "alice"}));
    }
    let last = trail.last().and_then(|t| t["decision"].as_str()).unwrap_or("reject").to_owned();
    json!({"decision": last, "approver": "human", "trail": trail, "decision_id": "d"}).to_string()
}

fn log(lines: &[String]) -> Log {
    read_log(lines.join("\n").as_bytes(), None).unwrap()
}

#[test]
fn reads_scores_and_human_decisions() {
    let log = log(&[
        line(Some(2.0), Some("approve")),
        line(Some(9.0), Some("reject")),
        line(Some(5.5), Some("continue")),
        line(Some(7.0), Some("terminate")),
        line(Some(1.0), None),
        line(None, Some("approve")),
        String::new(),
        json!({"error": {"code": "invalid_policy", "message": "x"}}).to_string(),
    ]);
    assert_eq!((log.decisions, log.skipped), (6, 2));
    let samples: Vec<(f64, Option<Human>)> = log.samples.iter().map(|s| (s.score, s.human)).collect();
    use Human::*;
    assert_eq!(
        samples,
        [(2.0, Some(Allowed)), (9.0, Some(Blocked)), (5.5, Some(Allowed)), (7.0, Some(Blocked)), (1.0, None)]
    );
    // A person's step that timed out is nobody's verdict: the call counts as not decided.
    let mut timed_out: Value = serde_json::from_str(&line(Some(8.0), Some("reject"))).unwrap();
    timed_out["trail"][1]["timed_out"] = json!(true);
    let unjudged = read_log(timed_out.to_string().as_bytes(), None).unwrap();
    assert_eq!(unjudged.samples.iter().map(|s| (s.score, s.human)).collect::<Vec<_>>(), [(8.0, None)]);
    // Picking the monitor's step by name.
    let other = read_log(line(Some(3.0), None).as_bytes(), Some("scanner")).unwrap();
    assert!(other.samples.is_empty());
    let error = read_log("{\"trail\": []}\nnot json".as_bytes(), None).unwrap_err().to_string();
    assert!(error.starts_with("line 2: not JSON"), "{error}");
}

#[test]
fn escalation_and_agreement_by_threshold() {
    let log = log(&[
        line(Some(2.0), Some("approve")),
        line(Some(9.0), Some("reject")),
        line(Some(5.5), Some("approve")),
        line(Some(7.0), Some("reject")),
        line(Some(1.0), None),
    ]);
    let rows = rows(&log.samples, [0.0, 3.0, 6.0, 8.0, 10.0]);
    let summary: Vec<(f64, f64, Option<f64>, usize, usize)> =
        rows.iter().map(|r| (r.threshold, r.escalated, r.agreement, r.missed, r.needless)).collect();
    assert_eq!(
        summary,
        [
            (0.0, 1.0, Some(0.5), 0, 2),  // everything flagged: both allowed calls needlessly
            (3.0, 0.6, Some(0.75), 0, 1), // 5.5, 7, 9 flagged
            (6.0, 0.4, Some(1.0), 0, 0),  // 7 and 9 flagged: exactly what people blocked
            (8.0, 0.2, Some(0.75), 1, 0), // 7 passes but was rejected
            (10.0, 0.0, Some(0.5), 2, 0), // nothing flagged
        ]
    );
    assert!(rows.iter().all(|r| r.blocked == 2));
    let text = table(&log, &rows);
    assert!(
        text.starts_with(
            "5 decisions, 5 scored by the monitor, 4 of those decided by a person (2 rejected or terminated)."
        ),
        "{text}"
    );
    assert!(text.contains("            6      40.0%     100.0%       0         0"), "{text}");
    assert!(
        text.contains("highest approve_below that passes no call a person blocked: 6 (escalates 40.0% of calls)"),
        "{text}"
    );
}

#[test]
fn without_people_agreement_is_unknown() {
    let log = log(&[line(Some(4.0), None)]);
    let rows = rows(&log.samples, default_thresholds());
    assert_eq!(rows.len(), 11);
    assert_eq!((rows[4].escalated, rows[4].agreement, rows[5].escalated), (1.0, None, 0.0));
    let text = table(&log, &rows);
    assert!(text.contains("-"), "{text}");
    assert!(!text.contains("highest") && !text.contains("best"), "{text}");
}

#[test]
fn the_chart_is_a_standalone_svg() {
    let log = log(&[line(Some(2.0), Some("approve")), line(Some(9.0), Some("reject"))]);
    let chart = svg(&rows(&log.samples, default_thresholds()), "monitor <gpt>");
    assert!(chart.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(chart.trim_end().ends_with("</svg>"));
    assert_eq!(chart.matches("<polyline").count(), 3);
    assert!(chart.contains("monitor &lt;gpt&gt;"));
    assert!(chart.contains(">approve_below</text>"));
}
