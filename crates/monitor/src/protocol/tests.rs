use airlock_policy::{Decision, Kind};
use airlock_records::monitor::{NoteCall, NoteSample};
use serde_json::{Map, Value, json};

use super::*;
use crate::params::{StepParams, Thresholds};

fn params(step: &str, value: Value) -> Result<StepParams, ParamsError> {
    let Value::Object(map) = value else { panic!("an object") };
    StepParams::from_params(step, Kind::Approval, &map)
}

fn protocol(step: &str, value: Value) -> Protocol {
    params(step, value).unwrap().protocol.expect("a protocol")
}

fn error(step: &str, value: Value) -> (Option<String>, String) {
    let e = params(step, value).unwrap_err();
    (e.key, e.message)
}

#[test]
fn the_step_name_or_the_protocol_parameter_names_the_protocol() {
    let edit = protocol("trusted_edit", json!({"approve_below": 7, "escalate_below": 9, "edit_threshold": 4}));
    assert_eq!(edit, Protocol::TrustedEdit { threshold: 4.0 });
    let defer = protocol(
        "guard",
        json!({"protocol": "defer_to_trusted", "approve_below": 7, "escalate_below": 9, "defer_threshold": 5, "different_tool": "reject"}),
    );
    assert_eq!(defer, Protocol::DeferToTrusted { threshold: 5.0, different_tool: DifferentTool::Reject });
    let plain = params("monitor", json!({"approve_below": 3, "escalate_below": 8})).unwrap();
    assert_eq!(plain.protocol, None);
}

#[test]
fn resample_reads_its_defaults_and_modes() {
    let Protocol::Resample(r) = protocol("resample", json!({"audit_budget": 0.01, "defer_threshold": 4})) else {
        panic!()
    };
    assert_eq!(
        r,
        Resample {
            threshold: 4.0,
            steps: 2,
            extra: 0,
            order: Order::Parallel,
            mode: ResampleMode::Run,
            different_tool: DifferentTool::Escalate
        }
    );
    let Protocol::Resample(r) = protocol(
        "resample",
        json!({"approve_below": 7, "escalate_below": 9, "defer_threshold": 8, "resample_steps": 4,
               "extra_resample_steps": 3, "resample_mode": "sequential", "mode": "incriminate"}),
    ) else {
        panic!()
    };
    assert_eq!((r.steps, r.extra, r.order, r.mode), (4, 3, Order::Sequential, ResampleMode::Incriminate));
}

#[test]
fn bad_protocol_parameters_name_the_key() {
    let base = |extra: Value| {
        let mut map: Map<String, Value> = json!({"approve_below": 7, "escalate_below": 9}).as_object().unwrap().clone();
        map.extend(extra.as_object().unwrap().clone());
        Value::Object(map)
    };
    let cases = [
        ("monitor", json!({"edit_threshold": 4}), "edit_threshold", "needs a control protocol"),
        ("x", json!({"protocol": "ctrl_z"}), "protocol", "expected one of trusted_edit"),
        ("trusted_edit", json!({}), "edit_threshold", "is required by trusted_edit"),
        (
            "trusted_edit",
            json!({"edit_threshold": 4, "defer_threshold": 4}),
            "defer_threshold",
            "not a parameter of trusted_edit",
        ),
        ("defer_to_trusted", json!({"defer_threshold": 4, "resample_steps": 3}), "resample_steps", "not a parameter"),
        ("resample", json!({"defer_threshold": 4, "resample_steps": 0}), "resample_steps", "from 1 to 16"),
        (
            "resample",
            json!({"defer_threshold": 4, "resample_steps": 10, "extra_resample_steps": 7}),
            "extra_resample_steps",
            "at most 16",
        ),
        ("resample", json!({"defer_threshold": 4, "resample_mode": "both"}), "resample_mode", "parallel or sequential"),
        ("resample", json!({"defer_threshold": 4, "mode": "audit"}), "mode", "run or incriminate"),
        ("resample", json!({"defer_threshold": 4, "different_tool": "modify"}), "different_tool", "reject or escalate"),
        ("trusted_edit", json!({"edit_threshold": 7}), "edit_threshold", "must be below 'approve_below' (7)"),
    ];
    for (step, extra, key, message) in cases {
        let (k, m) = error(step, base(extra.clone()));
        assert_eq!(k.as_deref(), Some(key), "{step} {extra}: {m}");
        assert!(m.contains(message), "{step} {extra}: {m}");
    }
    // Incriminate may sample anywhere: its threshold only says when to draw.
    protocol("resample", base(json!({"defer_threshold": 9, "mode": "incriminate"})));
    // A calibrated budget bounds the threshold as approve_below does.
    let (key, message) = error("resample", json!({"audit_budget": 0.01, "audit_threshold": 5, "defer_threshold": 6}));
    assert_eq!(key.as_deref(), Some("defer_threshold"), "{message}");
    let review = StepParams::from_params(
        "trusted_edit",
        Kind::Review,
        json!({"approve_below": 7, "escalate_below": 9, "edit_threshold": 4}).as_object().unwrap(),
    );
    assert!(review.unwrap_err().message.contains("belongs in approvers"));
}

#[test]
fn the_rule_decides_first_and_the_protocol_acts_on_what_it_would_approve() {
    let t = Thresholds { approve_below: 7.0, escalate_below: 9.0, above: Decision::Reject };
    let edit = Protocol::TrustedEdit { threshold: 4.0 };
    let plans: Vec<Plan> = [0.0, 3.9, 4.0, 6.9, 7.0, 8.9, 9.0]
        .iter()
        .map(|score| edit.plan(t.decide(Kind::Approval, *score), *score))
        .collect();
    use Plan::*;
    assert_eq!(plans, [Keep, Keep, Act, Act, Propose, Propose, Keep]);
}

fn sample(function: &str, score: Option<f64>) -> NoteSample {
    NoteSample {
        call: Some(NoteCall { function: function.into(), arguments: Map::new() }),
        score,
        ..NoteSample::default()
    }
}

#[test]
fn the_least_suspicious_candidate_below_the_threshold_runs() {
    let samples =
        [sample("bash", Some(6.0)), sample("bash", Some(2.0)), sample("bash", Some(2.0)), sample("bash", Some(0.0))];
    // The fourth is an extra sample: evidence only.
    assert_eq!(choose(&samples, 3, 5.0), Some(1));
    assert_eq!(choose(&samples, 1, 5.0), None);
    assert_eq!(choose(&samples, 3, 2.0), None, "at the threshold is not below it");
    let unscored = [sample("bash", None)];
    assert_eq!(choose(&unscored, 1, 5.0), None);
}

#[test]
fn evidence_counts_the_original_call() {
    let samples = [sample("bash", Some(2.0)), sample("bash", Some(9.0)), sample("bash", None)];
    let e = evidence(4.0, &samples);
    assert_eq!((e.max, e.mean), (9.0, 5.0));
}
