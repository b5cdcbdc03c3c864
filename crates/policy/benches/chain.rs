//! The cost of deciding one call: a 10-step chain with mixed globs over a corpus of 1,000
//! realistic calls, the same policy and corpus `bench/inspect_policy_bench.py` runs through
//! Inspect's own `policy_approver`.

use std::fs;
use std::hint::black_box;
use std::path::PathBuf;

use airlock_policy::chain::{ChainState, Input, Policy};
use airlock_policy::render::format_function_call;
use airlock_policy::{Call, Kind};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn load() -> (Policy, Vec<Call>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench");
    let text = fs::read_to_string(dir.join("policy10.yaml")).expect("bench/policy10.yaml");
    let policy = Policy::parse("policy10.yaml", &text, Kind::Approval).expect("a valid policy");
    let corpus = fs::read_to_string(dir.join("corpus.jsonl")).expect("bench/corpus.jsonl");
    let calls = corpus
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| Call::from_json(&serde_json::from_str(l).expect("JSON")).expect("a call"))
        .collect();
    (policy, calls)
}

fn chain(c: &mut Criterion) {
    let (policy, calls) = load();
    let mut group = c.benchmark_group("policy10");
    group.throughput(Throughput::Elements(calls.len() as u64));
    group.bench_function("evaluate", |b| {
        b.iter(|| {
            for call in &calls {
                let input = Input { call, message: "", output: None, metadata: None };
                black_box(policy.evaluate(black_box(&input), ChainState::default()));
            }
        })
    });
    group.bench_function("render+match", |b| {
        b.iter(|| {
            for call in &calls {
                black_box(policy.matching(&format_function_call(black_box(call))).ok());
            }
        })
    });
    group.bench_function("render", |b| {
        b.iter(|| {
            for call in &calls {
                black_box(format_function_call(black_box(call)));
            }
        })
    });
    group.finish();
}

/// Globs built to be slow, against long calls: a `*` and 40,000 `?` before a `b` (its `?`s
/// skipped, not searched for), and a segment of 2,000 classes searched through 100 KB (the
/// shape left that costs per character: it stops at the match budget).
fn hostile(c: &mut Criterion) {
    let question_marks = format!("*{}b", "?".repeat(40_000));
    let classes = format!("*{}b", "[a]".repeat(2_000));
    let call = |x: String| Call::from_json(&serde_json::json!({"function": "f", "arguments": {"x": x}})).unwrap();
    let cases = [
        ("40k ? vs 300 KB, no b", &question_marks, call("a".repeat(300_000))),
        (
            "40k ? vs 300 KB, b at 200 KB",
            &question_marks,
            call(format!("{}b{}", "a".repeat(200_000), "a".repeat(100_000))),
        ),
        ("2k classes vs 100 KB, past the budget", &classes, call("a".repeat(100_000))),
    ];
    let mut group = c.benchmark_group("hostile glob");
    group.sample_size(10);
    for (name, glob, call) in cases {
        let text = format!("approvers:\n  - name: auto\n    tools: \"{glob}\"\n    decision: approve\n");
        let policy = Policy::parse("hostile.yaml", &text, Kind::Approval).expect("a valid policy");
        let input = Input { call: &call, message: "", output: None, metadata: None };
        group.bench_function(name, |b| b.iter(|| black_box(policy.evaluate(black_box(&input), ChainState::default()))));
    }
    group.finish();
}

criterion_group!(benches, chain, hostile);
criterion_main!(benches);
