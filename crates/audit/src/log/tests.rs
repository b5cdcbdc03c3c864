use serde_json::json;

use super::*;

fn decision(id: &str) -> v1::Decision {
    v1::Decision {
        decision_id: id.into(),
        decision: v1::DecisionKind::Modify.into(),
        modified: Some(v1::ToolCall {
            function: "fetch".into(),
            arguments_json: json!({"url": "https://x", "token": "s3cr3t"}).to_string(),
            ..Default::default()
        }),
        metadata_json: json!({"password": "hunter2", "score": 1}).to_string(),
        ..Default::default()
    }
}

fn temp_log(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("airlock-audit-{}-{name}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn masks_keys_at_any_depth() {
    let mut value = json!({"modified": {"arguments": {"password": "hunter2", "cmd": "ls", "env": [{"token": "t"}]}}});
    mask_keys(&mut value, &["password".into(), "token".into()]);
    assert_eq!(value, json!({"modified": {"arguments": {"password": "***", "cmd": "ls", "env": [{"token": "***"}]}}}));
}

#[test]
fn each_decision_is_written_once_masked_even_after_reopening() {
    let path = temp_log("once");
    let mask = vec!["token".to_owned(), "password".to_owned()];
    let mut log = DecisionLog::open(&path, mask.clone()).unwrap();
    assert!(log.append(&decision("d1")).unwrap());
    assert!(!log.append(&decision("d1")).unwrap());
    drop(log);
    let mut log = DecisionLog::open(&path, mask).unwrap();
    assert!(!log.append(&decision("d1")).unwrap());
    assert!(log.append(&decision("d2")).unwrap());

    let text = std::fs::read_to_string(&path).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1]["decision_id"], "d2");
    assert_eq!(records[0]["modified"]["arguments"], json!({"url": "https://x", "token": MASK}));
    assert_eq!(records[0]["metadata"], json!({"password": MASK, "score": 1}));
    assert!(!text.contains("s3cr3t") && !text.contains("hunter2"));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_line_torn_by_a_killed_auditor_leaves_the_next_record_readable() {
    let path = temp_log("torn");
    let mut log = DecisionLog::open(&path, Vec::new()).unwrap();
    assert!(log.append(&decision("d1")).unwrap());
    drop(log);
    let whole = std::fs::read(&path).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(&whole[..whole.len() / 2]);
    std::fs::write(&path, &torn).unwrap();

    let mut log = DecisionLog::open(&path, Vec::new()).unwrap();
    assert!(log.append(&decision("d2")).unwrap());
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "d1, the torn line, d2: {text}");
    assert!(serde_json::from_str::<Value>(lines[1]).is_err(), "the torn line stays as it was");
    let last: Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(last["decision_id"], "d2");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_log_in_a_missing_directory_fails_with_its_path() {
    let path = std::env::temp_dir().join("airlock-audit-no-such-dir").join("log.jsonl");
    let error = DecisionLog::open(&path, Vec::new()).unwrap_err();
    assert!(error.to_string().starts_with(&path.display().to_string()), "{error}");
}
