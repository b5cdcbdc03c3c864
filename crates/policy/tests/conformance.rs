//! Agreement with Inspect on the vectors `tests/conformance/generate.py` took from
//! inspect-ai's own functions: rendering, glob matching and whole chain outcomes.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use airlock_policy::chain::{ChainState, Input, Policy, Verdict};
use airlock_policy::glob::{Budget, ToolMatcher, expand_tools};
use airlock_policy::render::format_function_call;
use airlock_policy::{Call, Kind};
use serde_json::Value;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance")
}

/// The vectors of one file; lines may hold U+2028 and friends, so split on `\n` only.
fn vectors(name: &str) -> Vec<Value> {
    let text = fs::read_to_string(vectors_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    text.split('\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn tool_specs(tools: &Value) -> Vec<String> {
    match tools {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().map(|i| i.as_str().expect("tools are strings").to_owned()).collect(),
        other => panic!("unexpected tools {other}"),
    }
}

#[test]
fn renders_every_call_like_format_function_call() {
    let cases = vectors("render.jsonl");
    assert!(cases.len() > 400);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let call = Call::from_json(&case["call"]).expect("a call");
            let got = format_function_call(&call);
            let want = case["rendered"].as_str().unwrap();
            (got != want).then(|| format!("{}\n  want {want:?}\n  got  {got:?}", case["call"]))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn matches_every_glob_like_policy_approver() {
    let cases = vectors("match.jsonl");
    assert!(cases.len() > 20_000);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let specs = tool_specs(&case["tools"]);
            let globs = expand_tools(specs.iter().map(String::as_str));
            let candidate = case.get("rendered").or(case.get("candidate")).and_then(Value::as_str).unwrap();
            let matcher = ToolMatcher::new(&[globs]).unwrap_or_else(|e| panic!("{specs:?}: {e}"));
            let want = case["matches"].as_bool().unwrap();
            (matcher.step_matches(0, candidate, &mut Budget::evaluation()) != Ok(want))
                .then(|| format!("{specs:?} vs {candidate:?}: want {want}"))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn decides_every_chain_like_inspect() {
    let cases = vectors("chains.jsonl");
    assert!(cases.len() > 400);
    let mut policies: HashMap<(String, String), Policy> = HashMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let file = case["policy"].as_str().unwrap().to_owned();
        let kind_name = case["kind"].as_str().unwrap().to_owned();
        let policy = policies.entry((file.clone(), kind_name.clone())).or_insert_with(|| {
            let text = fs::read_to_string(vectors_dir().join(&file)).unwrap();
            Policy::parse(&file, &text, kind_name.parse::<Kind>().unwrap()).unwrap_or_else(|e| panic!("{e}"))
        });
        let call = Call::from_json(&case["call"]).unwrap();
        let Verdict::Decided(outcome) = policy
            .evaluate(&Input { call: &call, message: "", output: Some(""), metadata: None }, ChainState::default())
        else {
            panic!("{file}: only built-in steps in the vectors");
        };
        let trail: Vec<Value> = outcome
            .trail
            .iter()
            .map(|t| {
                serde_json::json!({"approver": t.approver, "decision": t.answer.decision.as_str(), "explanation": t.answer.explanation})
            })
            .collect();
        let steps: Vec<Value> = outcome.trail.iter().filter_map(|t| t.step).map(|s| Value::from(s as u64)).collect();
        let got = serde_json::json!({
            "decision": outcome.decision.as_str(),
            "explanation": outcome.explanation,
            "approver": outcome.approver,
            "trail": trail,
            "steps": steps,
        });
        let want = serde_json::json!({
            "decision": case["decision"],
            "explanation": case["explanation"],
            "approver": case["approver"],
            "trail": case["trail"],
            "steps": case["steps"],
        });
        if got != want {
            failures.push(format!("{file} {kind_name} {}\n  want {want}\n  got  {got}", case["call"]));
        }
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
