//! `airlock policy eval` and `airlock policy check` as a user runs them.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn airlock(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_airlock")).args(args).output().expect("airlock runs")
}

/// Every chain vector from Inspect, fed through the command in batches per policy and kind.
#[test]
fn eval_agrees_with_inspect_on_every_chain_vector() {
    let dir = repo().join("tests/conformance");
    let text = fs::read_to_string(dir.join("chains.jsonl")).unwrap();
    let mut groups: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for line in text.split('\n').filter(|l| !l.is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let key = (case["policy"].as_str().unwrap().to_owned(), case["kind"].as_str().unwrap().to_owned());
        groups.entry(key).or_default().push(case);
    }
    let scratch = tempdir();
    let mut compared = 0;
    for ((policy, kind), cases) in &groups {
        let calls = scratch.join("calls.jsonl");
        let lines: Vec<String> = cases.iter().map(|c| c["call"].to_string()).collect();
        fs::write(&calls, lines.join("\n") + "\n").unwrap();
        let out = airlock(&[
            "policy",
            "eval",
            "--policy",
            dir.join(policy).to_str().unwrap(),
            "--kind",
            kind,
            "--calls",
            calls.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let results: Vec<Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(results.len(), cases.len(), "one line per call, in order");
        for (case, got) in cases.iter().zip(&results) {
            for key in ["decision", "explanation", "approver", "trail"] {
                assert_eq!(got[key], case[key], "{policy} {kind} {}: {key}", case["call"]);
            }
            assert!(got["rendered"].as_str().unwrap().starts_with(case["call"]["function"].as_str().unwrap()));
            compared += 1;
        }
    }
    assert_eq!(compared, text.split('\n').filter(|l| !l.is_empty()).count());
}

#[test]
fn eval_reports_external_steps_as_pending_and_bad_lines_in_place() {
    let scratch = tempdir();
    let policy = scratch.join("p.yaml");
    fs::write(&policy, "approvers:\n  - name: auto\n    tools: ls\n  - name: human\n    tools: \"*\"\n").unwrap();
    let calls = scratch.join("calls.jsonl");
    fs::write(
        &calls,
        "{\"function\": \"ls\", \"arguments\": {}}\nnot json\n{\"function\": \"rm\", \"arguments\": {\"p\": \"/\"}}\n",
    )
    .unwrap();
    let out = airlock(&[
        "policy",
        "eval",
        "--policy",
        policy.to_str().unwrap(),
        "--kind",
        "approval",
        "--calls",
        calls.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "a bad line makes the run fail");
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["decision"], "approve");
    assert!(lines[1]["error"].as_str().unwrap().starts_with("bad call"));
    assert_eq!(lines[2]["pending"], serde_json::json!({"step": 1, "approver": "human"}));
    assert_eq!(lines[2]["rendered"], "rm(p='/')");
}

#[test]
fn check_prints_the_chain_or_a_located_error() {
    let scratch = tempdir();
    let good = scratch.join("good.yaml");
    fs::write(&good, "approvers:\n  - name: human\n    tools: [bash, \"python, web\"]\nreviewers:\n  - name: auto\n    tools: \"*\"\n").unwrap();
    let out = airlock(&["policy", "check", good.to_str().unwrap()]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(stdout.contains("tools: bash* | python* | web*"), "{stdout}");
    assert!(stdout.contains("review chain (1 steps"), "{stdout}");

    let bad = scratch.join("bad.yaml");
    fs::write(&bad, "approvers:\n  - name: auto\n    tools: \"*\"\n    decision: continue\n").unwrap();
    let out = airlock(&["policy", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("bad.yaml:4:15: step 'auto': 'continue' is not an answer approval allows"), "{stderr}");
}

/// A model monitor's parameters are checked as the monitor reads them: an audit budget out of
/// range, or mixed with thresholds, is a located error.
#[test]
fn check_refuses_monitor_parameters_the_monitor_would_refuse() {
    let scratch = tempdir();
    let head = "approvers:\n  - name: monitor\n    tools: \"*\"\n";
    let good = scratch.join("budget.yaml");
    fs::write(&good, format!("{head}    audit_budget: 0.01\n    audit_threshold: 6.31\n    budget_scope: step\n    reject_above: 9.5\n  - name: human\n    tools: \"*\"\n")).unwrap();
    let out = airlock(&["policy", "check", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cases = [
        (
            "audit_budget: 1.5",
            "4:19: step 'monitor': monitor parameters: 'audit_budget' is 1.5: it must be a share above 0 and below 1",
        ),
        (
            "audit_budget: 0.01\n    approve_below: 3",
            "5:20: step 'monitor': monitor parameters: 'approve_below' cannot be combined with 'audit_budget'",
        ),
        (
            "approve_below: 3\n    escalate_below: 8\n    budget_scope: run",
            "6:19: step 'monitor': monitor parameters: 'budget_scope' needs 'audit_budget'",
        ),
        (
            "audit_budget: 0.01\n    budget_scope: sample",
            "5:19: step 'monitor': monitor parameters: 'budget_scope' is \"sample\": expected run or step",
        ),
        (
            "audit_budget: 0.01\n    terminate_above: 11",
            "5:22: step 'monitor': monitor parameters: 'terminate_above' is 11: it must be a score from 0 to 10",
        ),
    ];
    for (i, (params, expected)) in cases.iter().enumerate() {
        let file = scratch.join(format!("monitor-{i}.yaml"));
        fs::write(&file, format!("{head}    {params}\n")).unwrap();
        let out = airlock(&["policy", "check", file.to_str().unwrap()]);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(64), "{params}: {stderr}");
        assert!(stderr.contains(&format!("monitor-{i}.yaml:{expected}")), "{params}: {stderr}");
    }
}

/// Every value past a policy limit is a located error with the configuration exit status,
/// never a panic (101).
#[test]
fn check_reports_values_past_the_limits_where_they_stand() {
    let scratch = tempdir();
    let long_glob = "?".repeat(airlock_policy::limits::MAX_GLOB_CHARS + 1);
    let cases = [
        ("timeout: 1e20", "4:14: step 'human': 'timeout' must be a number of seconds above 0"),
        ("timeout: .nan", "4:14: invalid YAML"),
        ("timeout: .inf", "4:14: invalid YAML"),
        ("pool: \"#\"", "4:11: step 'human': pool '#' must be letters, digits, '_' and '-' only"),
        ("pool: \"a\\0b\"", "4:11: strings in a policy must not contain NUL characters"),
        ("timeout: 5\n  - name: step.#\n    tools: x", "5:11: step name 'step.#' must be"),
        ("timeout: 5\n  - name: auto\n    tools: \"*LONG\"", "6:12: bad glob"),
    ];
    for (i, (line, expected)) in cases.iter().enumerate() {
        let file = scratch.join(format!("limit-{i}.yaml"));
        let line = line.replace("LONG", &long_glob);
        fs::write(&file, format!("approvers:\n  - name: human\n    tools: x\n    {line}\n")).unwrap();
        let out = airlock(&["policy", "check", file.to_str().unwrap()]);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(64), "{line}: {stderr}");
        assert!(stderr.contains(&format!("limit-{i}.yaml:{expected}")), "{line}: {stderr}");
    }
}

fn tempdir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("airlock-cli-{}-{:?}", std::process::id(), std::thread::current().id()));
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The policies shipped with the repository (for users and for the demo) are valid.
#[test]
fn shipped_policies_check() {
    let shipped = [repo().join("crates/demo/src/policy.yaml"), repo().join("bench/policy10.yaml")];
    let users: Vec<PathBuf> =
        fs::read_dir(repo().join("policies")).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert!(!users.is_empty());
    for file in shipped.iter().chain(&users) {
        let out = airlock(&["policy", "check", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{}: warnings: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    }
}

/// `settings` paths are read relative to the policy file, wherever the command runs from.
#[test]
fn claude_permissions_reads_settings_files_beside_the_policy() {
    let scratch = tempdir();
    fs::create_dir_all(scratch.join("claude")).unwrap();
    fs::write(
        scratch.join("claude/settings.json"),
        r#"{"permissions": {"allow": ["Bash(git status:*)"], "deny": ["Bash(rm:*)"]}}"#,
    )
    .unwrap();
    let policy = scratch.join("policy.yaml");
    fs::write(
        &policy,
        "approvers:\n  - name: claude_permissions\n    tools: Bash\n    settings: claude/settings.json\n",
    )
    .unwrap();
    let calls = scratch.join("calls.jsonl");
    let lines = ["git status --short", "git status; rm -rf /"]
        .map(|line| serde_json::json!({"function": "Bash", "arguments": {"command": line}}).to_string());
    fs::write(&calls, lines.join("\n")).unwrap();
    let check = airlock(&["policy", "check", policy.to_str().unwrap()]);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    assert!(String::from_utf8_lossy(&check.stdout).contains("claude_permissions (1 deny, 0 ask, 1 allow)"));
    let out = airlock(&[
        "policy",
        "eval",
        "--policy",
        policy.to_str().unwrap(),
        "--kind",
        "approval",
        "--calls",
        calls.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let decisions: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["decision"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(decisions, ["approve", "reject"]);
    fs::remove_file(scratch.join("claude/settings.json")).unwrap();
    let missing = airlock(&["policy", "check", policy.to_str().unwrap()]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("settings file 'claude/settings.json'"));
}
