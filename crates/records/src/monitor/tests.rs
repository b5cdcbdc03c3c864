//! The monitor's note: its JSON form, read back whole or partial, and what is not a note.

use super::*;

fn scored() -> MonitorNote {
    MonitorNote {
        monitor: "monitor-1".into(),
        provider: "openai".into(),
        model: "gpt-x".into(),
        score: Some(7.5),
        reason: Some("deletes files".into()),
        thresholds: Some(NoteThresholds { approve_below: 3.0, escalate_below: 8.0, above: "reject".into() }),
        attempts: 2,
        ..MonitorNote::default()
    }
}

#[test]
fn a_scored_note_has_its_json_form() {
    assert_eq!(
        serde_json::to_string(&scored()).unwrap(),
        r#"{"monitor":"monitor-1","provider":"openai","model":"gpt-x","score":7.5,"reason":"deletes files","thresholds":{"approve_below":3.0,"escalate_below":8.0,"above":"reject"},"attempts":2}"#
    );
}

#[test]
fn a_fallback_and_a_timeout_have_their_json_form() {
    let fallback = MonitorNote {
        monitor: "m".into(),
        provider: "anthropic".into(),
        model: "claude".into(),
        error: Some("provider_error".into()),
        error_message: Some("503".into()),
        fallback: true,
        attempts: 3,
        ..MonitorNote::default()
    };
    assert_eq!(
        serde_json::to_string(&fallback).unwrap(),
        r#"{"monitor":"m","provider":"anthropic","model":"claude","error":"provider_error","error_message":"503","fallback":true,"attempts":3}"#
    );
    let timed_out = MonitorNote { fallback: false, on_timeout: true, error: Some("deadline".into()), ..fallback };
    assert_eq!(
        serde_json::to_string(&timed_out).unwrap(),
        r#"{"monitor":"m","provider":"anthropic","model":"claude","error":"deadline","error_message":"503","on_timeout":true,"attempts":3}"#
    );
}

#[test]
fn a_note_reads_back_and_a_partial_one_reads() {
    let note = scored();
    assert_eq!(MonitorNote::read(&serde_json::to_value(&note).unwrap()), Some(note));
    let partial = MonitorNote::read(&serde_json::json!({"score": 5, "thresholds": {"approve_below": 3}, "other": [1]}))
        .expect("a partial note");
    assert_eq!(partial.score, Some(5.0));
    assert_eq!(partial.thresholds.map(|t| t.approve_below), Some(3.0));
    assert_eq!(partial.model, "");
}

#[test]
fn what_is_not_a_note_reads_as_none() {
    assert_eq!(MonitorNote::read(&serde_json::json!([1, 2])), None);
    assert_eq!(MonitorNote::read(&serde_json::json!({"score": "high"})), None);
}

#[test]
fn a_budgeted_note_has_its_json_form_and_reads_back() {
    let note = MonitorNote {
        score: Some(9.2),
        budget: Some(NoteBudget {
            audit_budget: 0.05,
            mode: "paced".into(),
            scope: "run-1".into(),
            threshold: 8.5,
            share: 0.05,
            seen: 40,
            passed: 2,
            left: 0.0,
            reject_above: None,
            terminate_above: Some(9.9),
        }),
        ..MonitorNote::default()
    };
    let text = serde_json::to_string(&note).unwrap();
    assert_eq!(
        text,
        r#"{"monitor":"","provider":"","model":"","score":9.2,"budget":{"audit_budget":0.05,"mode":"paced","scope":"run-1","threshold":8.5,"share":0.05,"seen":40,"passed":2,"left":0.0,"terminate_above":9.9},"attempts":0}"#
    );
    assert_eq!(MonitorNote::read(&serde_json::from_str(&text).unwrap()), Some(note));
}
