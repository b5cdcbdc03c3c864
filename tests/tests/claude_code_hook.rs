//! `airlock hook`, the Claude Code command hook, against a stand-in gateway on 127.0.0.1: what
//! the gateway answers goes to stdout as it is; every failure (input that is not a hook's, no
//! token, no gateway, a gateway that does not answer in time, answers other than `200` or not
//! JSON) denies a `PreToolUse` and blocks a `PostToolUse` on stdout and exits 2, Claude Code's
//! blocking error. The real gateway and the real Claude Code CLI are in
//! `examples/agents/claude_code_hooks` (run by `agent_examples`).

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use airlock_gateway::http::CLAUDE_CODE_HOOKS;
use airlock_tests::airlock_bin;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

const TOKEN: &str = "hook-test-token";

fn input(event: &str) -> Value {
    json!({
        "session_id": "sess-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "toolu_1",
        "tool_response": {"stdout": "", "stderr": ""},
    })
}

/// What the stand-in gateway answers.
#[derive(Clone)]
enum Stub {
    Answer(StatusCode, &'static str),
    Never,
}

/// Serves `stub` at the hook route; the requests' URIs and authorizations are kept.
async fn gateway(stub: Stub) -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    let app = Router::new().route(
        CLAUDE_CODE_HOOKS,
        post(move |uri: Uri, headers: HeaderMap| {
            let (stub, record) = (stub.clone(), record.clone());
            async move {
                let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
                record.lock().unwrap().push((uri.to_string(), authorization.to_owned()));
                match stub {
                    Stub::Answer(status, body) => (status, body),
                    Stub::Never => std::future::pending().await,
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, asked)
}

struct Ran {
    code: Option<i32>,
    stdout: Value,
    stderr: String,
}

/// Runs `airlock hook` with `args` and the token in the environment (unless `token` is none).
async fn hook(args: &[&str], token: Option<&str>, stdin: &[u8]) -> Ran {
    let mut command = tokio::process::Command::new(airlock_bin());
    command.arg("hook").args(args).env_remove("AIRLOCK_GATEWAY_TOKEN").env_remove("AIRLOCK_GATEWAY_URL");
    if let Some(token) = token {
        command.env("AIRLOCK_GATEWAY_TOKEN", token);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin).await.unwrap();
    drop(pipe);
    let output = child.wait_with_output().await.unwrap();
    Ran {
        code: output.status.code(),
        stdout: serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn denied(ran: &Ran) -> bool {
    ran.code == Some(2) && ran.stdout["hookSpecificOutput"]["permissionDecision"] == "deny"
}

#[tokio::test]
async fn the_gateway_s_answer_is_the_hook_s_output() {
    let allow = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}"#;
    let (url, asked) = gateway(Stub::Answer(StatusCode::OK, allow)).await;
    let args = ["--gateway", &url, "--policy", "agents", "--escalated", "ask"];
    let ran = hook(&args, Some(TOKEN), input("PreToolUse").to_string().as_bytes()).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stdout, serde_json::from_str::<Value>(allow).unwrap());
    let (uri, authorization) = asked.lock().unwrap()[0].clone();
    assert_eq!(uri, "/v1/hooks/claude-code?policy=agents&timeout=30&escalated=ask");
    assert_eq!(authorization, format!("Bearer {TOKEN}"));
}

#[tokio::test]
async fn a_token_file_is_read_and_trimmed() {
    let (url, asked) = gateway(Stub::Answer(StatusCode::OK, "{}")).await;
    let file = std::env::temp_dir().join(format!("airlock-hook-token-{}", std::process::id()));
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let args = ["--gateway", &url, "--policy", "agents", "--token-file", file.to_str().unwrap()];
    let ran = hook(&args, None, input("PostToolUse").to_string().as_bytes()).await;
    std::fs::remove_file(&file).unwrap();
    assert_eq!((ran.code, &ran.stdout), (Some(0), &json!({})), "{}", ran.stderr);
    assert_eq!(asked.lock().unwrap()[0].1, format!("Bearer {TOKEN}"));
}

#[tokio::test]
async fn input_that_is_not_a_hook_s_is_refused_without_asking() {
    let (url, asked) = gateway(Stub::Answer(StatusCode::OK, "{}")).await;
    let args = ["--gateway", &url, "--policy", "agents"];
    let mut no_call = input("PreToolUse");
    no_call["tool_input"] = json!("ls");
    assert!(denied(&hook(&args, Some(TOKEN), no_call.to_string().as_bytes()).await));
    let ran = hook(&args, Some(TOKEN), b"{not json").await;
    assert_eq!((ran.code, &ran.stdout["decision"]), (Some(2), &json!("block")));
    assert!(ran.stderr.contains("the hook's input is not usable"), "{}", ran.stderr);
    assert!(asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_a_token_the_call_is_denied() {
    let (url, asked) = gateway(Stub::Answer(StatusCode::OK, "{}")).await;
    let ran = hook(&["--gateway", &url, "--policy", "agents"], None, input("PreToolUse").to_string().as_bytes()).await;
    assert!(denied(&ran), "{}", ran.stderr);
    assert!(ran.stderr.contains("no token"), "{}", ran.stderr);
    let pre = input("PreToolUse").to_string();
    assert!(denied(&hook(&["--gateway", &url, "--policy", "agents"], Some(" "), pre.as_bytes()).await));
    assert!(asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_gateway_that_cannot_be_reached_denies_and_blocks() {
    // A port just bound and released: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let args = ["--gateway", &url, "--policy", "agents"];
    let ran = hook(&args, Some(TOKEN), input("PreToolUse").to_string().as_bytes()).await;
    assert!(denied(&ran), "{}", ran.stderr);
    assert!(ran.stderr.contains("could not be asked"), "{}", ran.stderr);
    let ran = hook(&args, Some(TOKEN), input("PostToolUse").to_string().as_bytes()).await;
    assert_eq!((ran.code, &ran.stdout["decision"]), (Some(2), &json!("block")));
    let ran = hook(&["--gateway", "not a url", "--policy", "agents"], Some(TOKEN), b"{}").await;
    assert_eq!(ran.code, Some(2));
}

#[tokio::test]
async fn a_gateway_that_does_not_answer_in_time_denies() {
    let (url, asked) = gateway(Stub::Never).await;
    let args = ["--gateway", &url, "--policy", "agents", "--timeout", "0.2"];
    let ran = hook(&args, Some(TOKEN), input("PreToolUse").to_string().as_bytes()).await;
    assert!(denied(&ran), "{}", ran.stderr);
    assert_eq!(asked.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn answers_other_than_200_with_a_json_object_deny() {
    for (status, body) in [
        (StatusCode::UNAUTHORIZED, r#"{"error":{"code":"unauthorized","message":"no"}}"#),
        (StatusCode::ACCEPTED, "{}"),
        (StatusCode::SERVICE_UNAVAILABLE, ""),
        (StatusCode::OK, "allow"),
        (StatusCode::OK, r#"["allow"]"#),
    ] {
        let (url, _) = gateway(Stub::Answer(status, body)).await;
        let pre = input("PreToolUse").to_string();
        let ran = hook(&["--gateway", &url, "--policy", "agents"], Some(TOKEN), pre.as_bytes()).await;
        assert!(denied(&ran), "{status} {body}: {:?} {}", ran.code, ran.stderr);
    }
}
