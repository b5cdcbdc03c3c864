//! How much `bash_allowlist` approves of ordinary agent shell lines: the `bash` calls of
//! `bench/corpus.jsonl` and the everyday lines below, under an allow-list of read-only tools.
//! Every ordinary line here writes nothing and runs only allowed commands, so every one must
//! be approved; the test prints the shares that BENCHMARKS.md reports.

use std::fs;
use std::path::PathBuf;

use airlock_policy::steps::bash_allowlist::BashAllowlist;
use airlock_policy::steps::{Params, Subject};
use airlock_policy::{Call, Decision, Kind};
use serde_json::{Value, json};

/// Read-only lines that run only allowed commands.
const ORDINARY: &[&str] = &[
    "ls -la",
    "cat f | grep x",
    "git status && git log --oneline | head",
    "echo ok > /dev/null",
    "time ls",
    "ls -la /workspace",
    "pwd",
    "cat README.md",
    "head -n 50 /var/log/syslog",
    "git diff HEAD~1 -- src/app.py",
    "git log --oneline -n 20",
    "grep -rn 'TODO' src/",
    "grep -rn \"def main\" --include='*.py' .",
    "find . -name '*.py' -type f | head -20",
    "find . -maxdepth 2 -type d",
    "wc -l src/main.rs src/lib.rs",
    "sort data.csv | uniq -c | sort -rn | head",
    "sed -n '1,40p' src/main.rs",
    "sed 's/foo/bar/g' notes.txt | head",
    "awk -F, '{print $2}' data.csv | sort | uniq",
    "awk '$3 > 100 { print $1 }' data.txt",
    "cat src/app.py 2>/dev/null || echo missing",
    "ls src 2>&1 | head",
    "git show HEAD --stat",
    "grep -c error log.txt",
    "tail -n 100 app.log | grep -i error",
    "diff a.txt b.txt",
    "echo $PATH",
    "cat /etc/os-release",
    "ls -la && pwd",
    "time git status",
    "time -p grep -rn foo .",
    "cut -d: -f1 /etc/passwd | sort",
    "git branch -a",
    "cat <<< hello",
    "echo \"$(pwd)\"",
    "ls -la 2>/dev/null | wc -l",
    "grep -rl pattern . | sort > /dev/null",
    "find . -name '*.log' -newer ref -print",
    "head -c 200 file.txt; echo",
];

fn step() -> BashAllowlist {
    let params: Params = json!({
        "allowed_commands": [
            "ls", "cat", "grep", "head", "tail", "wc", "echo", "pwd", "find", "git", "sort", "uniq", "sed", "awk",
            "time", "diff", "cut", "tr", "du", "stat", "which", "tree", "file"
        ],
        "command_specific_rules": {"git": ["status", "log", "diff", "show", "branch"]},
    })
    .as_object()
    .unwrap()
    .clone();
    BashAllowlist::from_params(&params).unwrap()
}

fn approves(step: &BashAllowlist, line: &str) -> bool {
    let call = Call {
        id: "1".into(),
        function: "bash".into(),
        arguments: json!({ "cmd": line }).as_object().unwrap().clone(),
    };
    let subject =
        Subject { call: &call, rendered: "", kind: Kind::Approval, message: "", output: None, metadata: None };
    step.decide(&subject).decision == Decision::Approve
}

fn corpus_lines() -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/corpus.jsonl");
    fs::read_to_string(path)
        .expect("bench/corpus.jsonl")
        .lines()
        .filter_map(|line| {
            let call: Value = serde_json::from_str(line).ok()?;
            (call["function"] == "bash").then(|| call["arguments"]["cmd"].as_str().map(str::to_owned))?
        })
        .collect()
}

#[test]
fn ordinary_read_only_lines_are_approved() {
    let step = step();
    let corpus = corpus_lines();
    let corpus_approved = corpus.iter().filter(|line| approves(&step, line)).count();
    let refused: Vec<&&str> = ORDINARY.iter().filter(|line| !approves(&step, line)).collect();
    let all = corpus.len() + ORDINARY.len();
    let approved = corpus_approved + ORDINARY.len() - refused.len();
    println!(
        "corpus: {corpus_approved} of {} bash lines approved; ordinary: {} of {}; \
         together {approved} of {all} ({:.1}%)",
        corpus.len(),
        ORDINARY.len() - refused.len(),
        ORDINARY.len(),
        100.0 * approved as f64 / all as f64
    );
    assert!(refused.is_empty(), "read-only lines of allowed commands not approved: {refused:?}");
}
