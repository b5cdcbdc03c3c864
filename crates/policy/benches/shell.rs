//! The cost of judging one shell command line with `bash_allowlist`: typical agent lines (the
//! `bash` calls of `bench/corpus.jsonl`), and 200,000-character lines built to make a parser
//! rescan (digits, blanks inside `f( … )`, line continuations, many short commands).

use std::fs;
use std::hint::black_box;
use std::path::PathBuf;

use airlock_policy::steps::bash_allowlist::BashAllowlist;
use airlock_policy::steps::{Params, Subject};
use airlock_policy::{Call, Kind};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

/// Everyday agent lines, approved and escalated.
const TYPICAL: &[&str] = &[
    "ls -la",
    "cat README.md | grep -n install",
    "git status && git log --oneline | head",
    "echo ok > /dev/null",
    "time ls",
    "grep -rn 'TODO' src/",
    "find . -name '*.py' | xargs wc -l",
    "sed -n '1,40p' src/main.rs",
    "awk -F, '{print $2}' data.csv | sort | uniq -c",
    "rm -rf build/ dist/",
];

/// Lines of the file utilities and network tools whose targets are checked.
const WRITERS: &[&str] = &[
    "cp src/a.txt out/b.txt",
    "cp -r src out/",
    "mv out/a out/b",
    "ln -sf out/a out/link",
    "mkdir -p out/x/y",
    "rm -rf out/build",
    "tar -xzf a.tgz -C out",
    "curl -fsSL -o out/page.html https://example.com/",
    "curl -s https://example.com/ | grep -c x",
    "cat < /dev/tcp/example.com/80",
];

fn step() -> BashAllowlist {
    let params: Params = json!({
        "allowed_commands": ["ls", "cat", "grep", "head", "tail", "wc", "echo", "pwd", "find", "git", "sort", "uniq",
            "sed", "awk", "time", "cp", "mv", "ln", "mkdir", "rm", "tar", "curl"],
        "command_specific_rules": {"git": ["status", "log", "diff", "show"]},
        "allowed_write_paths": ["out/**"],
        // High enough to judge the long lines instead of escalating them unread.
        "max_command_bytes": 1_000_000,
    })
    .as_object()
    .unwrap()
    .clone();
    BashAllowlist::from_params(&params).unwrap()
}

fn call(line: &str) -> Call {
    Call { id: "1".into(), function: "bash".into(), arguments: json!({ "cmd": line }).as_object().unwrap().clone() }
}

fn corpus() -> Vec<Call> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/corpus.jsonl");
    fs::read_to_string(path)
        .expect("bench/corpus.jsonl")
        .lines()
        .filter_map(|line| {
            let value: Value = serde_json::from_str(line).ok()?;
            (value["function"] == "bash").then(|| value["arguments"]["cmd"].as_str().map(call))?
        })
        .collect()
}

fn decide(step: &BashAllowlist, call: &Call) {
    let subject = Subject { call, rendered: "", kind: Kind::Approval, message: "", output: None, metadata: None };
    black_box(step.decide(black_box(&subject)));
}

fn shell(c: &mut Criterion) {
    let step = step();
    let calls = corpus();
    let mut group = c.benchmark_group("bash_allowlist");
    group.throughput(Throughput::Elements(calls.len() as u64));
    group.bench_function("corpus lines", |b| b.iter(|| calls.iter().for_each(|call| decide(&step, call))));
    group.finish();

    let typical: Vec<Call> = TYPICAL.iter().map(|line| call(line)).collect();
    let mut group = c.benchmark_group("bash_allowlist typical");
    group.throughput(Throughput::Elements(typical.len() as u64));
    group.bench_function("lines", |b| b.iter(|| typical.iter().for_each(|call| decide(&step, call))));
    group.finish();

    let writers: Vec<Call> = WRITERS.iter().map(|line| call(line)).collect();
    let mut group = c.benchmark_group("bash_allowlist writers");
    group.throughput(Throughput::Elements(writers.len() as u64));
    group.bench_function("lines", |b| b.iter(|| writers.iter().for_each(|call| decide(&step, call))));
    group.finish();

    let long = [
        ("digits", format!("ls; {}", "1".repeat(200_000))),
        ("digits redirected", format!("ls; {}>/dev/null", "1".repeat(200_000))),
        ("blanks in f( )", format!("f({})", " ".repeat(200_000))),
        ("continuations", format!("ls {}", "\\\n".repeat(100_000))),
        ("plain word", format!("ls {}", "a".repeat(200_000))),
        ("short commands", "ls;".repeat(66_667)),
        ("short words", format!("ls{}", " a".repeat(100_000))),
    ];
    let mut group = c.benchmark_group("bash_allowlist 200 KB");
    group.sample_size(20);
    for (name, line) in &long {
        let call = call(line);
        group.bench_function(*name, |b| b.iter(|| decide(&step, &call)));
    }
    group.finish();
}

criterion_group!(benches, shell);
criterion_main!(benches);
