//! A person's decision in the reviewer UI, in headless Chromium, reaching Claude Code: the CLI
//! the `claude-agent-sdk` wheel bundles runs `touch` with the HTTP hook of
//! `examples/agents/claude_code_hooks/settings.json` pointed at a gateway; the policy
//! (`examples/agents/policies/claude_code.yaml`) sends the call to the pool `claude-code`; the
//! person approves one call and rejects the next on the reviewer's page, and the first runs and
//! the second does not. The model is the Agent SDK example's stand-in for the Messages API
//! (`fake_anthropic.py`), in the repository's `.venv`; the fleet runs in this process.
//!
//! Needs `.venv` with `claude-agent-sdk` and the browser kit ([`airlock_tests::webdriver`]);
//! without them the test skips, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_gateway::tokens::{TokenEntry, Tokens, sha256_hex};
use airlock_gateway::{Limits, state::Shared};
use airlock_reviewer::auth::{Reviewer, Reviewers};
use airlock_tests::webdriver::{Browser, in_browser};
use airlock_tests::{InProcessWorker, REVIEWER_TOKEN, TestKeys, repo, reviewer_config, venv_python};
use airlock_transport::MemoryTransport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const POOL: &str = "claude-code";
const GATEWAY_TOKEN: &str = "claude-code-browser-token";

#[tokio::test]
async fn a_person_s_decision_in_the_reviewer_ui_reaches_claude_code() {
    let needed = "the agent examples' requirements (python3 -m venv .venv && .venv/bin/pip install -r examples/agents/requirements.txt)";
    let Some(python) = venv_python("claude_agent_sdk", needed) else { return };
    in_browser(|| scenario(python)).await;
}

async fn scenario(python: PathBuf) {
    let prefix = "claude-code-browser";
    let transport = MemoryTransport::new();
    let mut config = reviewer_config(prefix, "sqlite::memory:", "reviewer");
    config.pools = vec![POOL.into()];
    config.reviewers = Reviewers::from_list(vec![Reviewer {
        name: "alice".into(),
        token_sha256: sha256_hex(REVIEWER_TOKEN),
        pools: vec![POOL.into()],
        admin: false,
        overrides: Vec::new(),
    }]);
    let reviewer = airlock_reviewer::Service::start(transport.clone(), config).await.expect("the reviewer starts");
    let policies = repo().join("examples/agents/policies");
    let worker = InProcessWorker::with_policies(transport.clone(), prefix, "worker", 8, Some(policies));
    let client_config = ClientConfig {
        prefix: prefix.into(),
        runner_id: "gateway".into(),
        default_timeout: Duration::from_secs(60),
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    let client = Client::connect(transport.clone(), client_config).await.expect("the gateway's client connects");
    let tokens = Tokens::from_list(vec![TokenEntry {
        name: "claude".into(),
        token_sha256: sha256_hex(GATEWAY_TOKEN),
        policies: vec!["claude_code".into()],
        inline: false,
    }]);
    let shared = Arc::new(Shared::new(Arc::new(client), tokens, Limits::default(), None, Default::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gateway = airlock_gateway::Service::serve(shared, listener, addr);
    let (mut model, model_url) = fake_model(&python).await;

    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", reviewer.local_addr())).await;
    browser.type_into(&browser.wait_for("input#token").await, REVIEWER_TOKEN).await;
    browser.click(&browser.wait_for("section.login button").await).await;
    browser.wait_for("#live.on").await;

    let work = tempdir("work");
    let settings = hook_settings(&format!("http://{addr}"));
    // Approved on the page: the command runs.
    let claude = claude_code(&python, &model_url, &work, &settings, "touch approved.txt");
    let card = browser.wait_for("article.task").await;
    let text = browser.text(&card).await;
    assert!(text.contains("touch approved.txt") && text.contains(&format!("cwd: {}", work.display())), "{text}");
    browser.click(&browser.wait_for("article.task button.approve").await).await;
    let output = browser.answer(claude.wait_with_output()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(work.join("approved.txt").exists(), "{}", String::from_utf8_lossy(&output.stdout));
    browser.wait_gone("article.task").await;

    // Rejected on the page: it does not, and the model reads the person's reason.
    let claude = claude_code(&python, &model_url, &work, &settings, "touch rejected.txt");
    browser.wait_for("article.task").await;
    browser.press("x").await;
    browser.type_into(&browser.wait_for("article.task textarea").await, "Not in this directory.").await;
    browser.press("\u{e00c}").await; // Escape leaves the field
    browser.press("r").await;
    let output = browser.answer(claude.wait_with_output()).await.unwrap();
    assert!(!work.join("rejected.txt").exists());
    let result: Value = serde_json::from_slice(&output.stdout).expect("the CLI's JSON result");
    let said = result["result"].as_str().unwrap_or_default();
    assert!(said.contains("Not in this directory."), "{result}");

    browser.quit().await;
    model.kill().await.unwrap();
    gateway.stop().await;
    reviewer.stop().await;
    worker.stop().await;
    let _ = std::fs::remove_dir_all(&work);
}

/// The HTTP hooks of the example's `settings.json`, posting to `gateway`.
fn hook_settings(gateway: &str) -> String {
    let snippet = std::fs::read_to_string(repo().join("examples/agents/claude_code_hooks/settings.json")).unwrap();
    snippet.replace("http://127.0.0.1:8090", gateway)
}

/// The Agent SDK example's Messages API stand-in, served by `python` until killed, and its URL.
async fn fake_model(python: &Path) -> (Child, String) {
    let agents = repo().join("examples/agents");
    let script = "import sys, time\n\
                  from local_http import serve\n\
                  from fake_anthropic import messages\n\
                  with serve(messages) as url:\n    print(url, flush=True)\n    time.sleep(3600)\n";
    let mut child = Command::new(python)
        .args(["-c", script])
        .env("PYTHONPATH", format!("{}:{}", agents.display(), agents.join("claude_agent_sdk_permissions").display()))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the model stand-in starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines.next_line().await.unwrap().expect("the model stand-in's URL");
    (child, url)
}

/// `claude -p PROMPT` in `work`, with `settings` and nothing of the user's, printing its result
/// as JSON.
fn claude_code(python: &Path, model: &str, work: &Path, settings: &str, prompt: &str) -> Child {
    let bundled = python
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("lib/python3.11/site-packages/claude_agent_sdk/_bundled/claude");
    let home = tempdir("home");
    Command::new(bundled)
        .args(["-p", prompt, "--output-format", "json", "--model", "claude-sonnet-4-5", "--setting-sources="])
        .args(["--settings", settings])
        .current_dir(work)
        .env("ANTHROPIC_BASE_URL", model)
        .env("ANTHROPIC_API_KEY", "not-a-key")
        .env("AIRLOCK_GATEWAY_TOKEN", GATEWAY_TOKEN)
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Claude Code CLI starts")
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("airlock-claude-code-{}-{name}", airlock_testkit::unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
