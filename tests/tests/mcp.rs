//! `airlock mcp` between the official MCP Python SDK's client and server
//! (`examples/agents/mcp_proxy`: `client.py`, `server.py`, which records every call it runs),
//! over a real worker, a plugin step and a reviewer service on the test broker: the client
//! on stdio in front of the server's streamable HTTP endpoint, and the client over
//! streamable HTTP in front of the server command. In each, a call approved for the tool's
//! annotations gets the tool's result; a rejected one an error result with the policy's words, and the tool never runs;
//! a modified one runs with the modified arguments; a person's approval, given through the
//! reviewer API while the client hears progress, runs the call; a call nobody answers fails
//! closed at its deadline; a result the review terminates never reaches the client.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use airlock_contract::v1;
use airlock_reviewer::Service;
use airlock_reviewer::client::ApiClient;
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::{
    InProcessWorker, REVIEWER_TOKEN, TestKeys, airlock_bin, broker, guarded, pending, repo, reviewer_config,
    venv_python,
};
use airlock_transport::{AmqpTransport, Destination, Message, Topology, Transport};
use prost::Message as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const POLICY: &str = r#"
approvers:
  - name: pattern
    tools: "*"
    metadata: readOnlyHint
    regex: "^true$"
    decision: approve
  - name: human
    tools: "delete_file(path='shared/"
    pool: ops
  - name: auto
    tools: delete_file
    decision: reject
    model_explanation: "Deleting files is not allowed here."
  - name: rewrite
    tools: write_file
reviewers:
  - name: pattern
    tools: "*"
    output: true
    regex: "BEGIN PRIVATE KEY"
    decision: terminate
    model_explanation: "The result held a private key."
"#;

/// The client's side of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The client starts the proxy and speaks on its stdio; the proxy fronts the server's URL.
    Stdio,
    /// The client speaks streamable HTTP to the proxy; the proxy starts the server command.
    Http,
}

#[tokio::test]
async fn the_sdks_client_on_stdio_is_gated_in_front_of_a_server_url() {
    scenario(Side::Stdio).await;
}

#[tokio::test]
async fn the_sdks_client_over_streamable_http_is_gated_in_front_of_a_server_command() {
    scenario(Side::Http).await;
}

async fn scenario(side: Side) {
    let Some(python) = venv_python("mcp", "the MCP SDK (.venv/bin/pip install -r examples/agents/requirements.txt)")
    else {
        return;
    };
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    let topology = Topology::new(&prefix).with_step("rewrite").with_human_pool("ops");
    guarded(topology.clone(), async move {
        transport.declare(&topology).await.unwrap();
        let worker = InProcessWorker::start(transport.clone(), &prefix, "mcp-worker", 8);
        serve_rewrite(&transport, &prefix).await;
        let dir = std::env::temp_dir().join(format!("airlock-mcp-{prefix}"));
        std::fs::create_dir_all(&dir).unwrap();
        let store = format!("sqlite:{}", dir.join("tasks.db").display());
        let service =
            Service::start(transport.clone(), reviewer_config(&prefix, &store, "mcp-reviewer")).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        let policy = dir.join("policy.yaml");
        std::fs::write(&policy, POLICY).unwrap();
        let calls = dir.join("calls.jsonl");
        let proxy = Proxy::start(side, &python, &prefix, &policy, &calls, "60").await;

        // Approved for what the server says of the tool (`readOnlyHint`): the tool's result.
        let mut call = proxy.call("read_file", json!({"path": "notes.txt"})).await;
        assert_eq!(call.last_line().await, "result: remember the milk");
        assert_eq!(ran(&calls), [json!({"tool": "read_file", "arguments": {"path": "notes.txt"}})]);

        // Rejected: an error result with the words the policy lets the model see; never run.
        let mut call = proxy.call("delete_file", json!({"path": "notes.txt"})).await;
        assert_eq!(call.last_line().await, "error: Deleting files is not allowed here.");
        assert_eq!(ran(&calls).len(), 1, "the rejected call never reached the server");

        // Modified by the plugin step: the server runs the modified arguments.
        let mut call = proxy.call("write_file", json!({"path": "out.txt", "text": "hi"})).await;
        assert_eq!(call.last_line().await, "result: wrote 2 characters to sandbox/out.txt");
        assert_eq!(
            ran(&calls)[1],
            json!({"tool": "write_file", "arguments": {"path": "sandbox/out.txt", "text": "hi"}})
        );

        // A person decides, through the reviewer API, while the client hears progress.
        let mut call = proxy.call("delete_file", json!({"path": "shared/old.txt"})).await;
        let heard = call.next_line().await;
        assert!(heard.starts_with("progress 1: Waiting for the Airlock fleet"), "{heard}");
        let task = pending(&api, 1).await.remove(0);
        assert_eq!(task["call"]["arguments"]["path"], "shared/old.txt");
        assert_eq!(ran(&calls).len(), 2, "nothing runs while the person thinks");
        api.decide(task["id"].as_str().unwrap(), "approve", Some("an old file")).await.unwrap();
        assert_eq!(call.last_line().await, "result: deleted shared/old.txt");
        assert_eq!(ran(&calls)[2], json!({"tool": "delete_file", "arguments": {"path": "shared/old.txt"}}));

        // A review that terminates: the client gets a JSON-RPC error, never the result.
        let mut call = proxy.call("read_file", json!({"path": "id_ed25519"})).await;
        let ended = call.last_line().await;
        assert!(
            ended.starts_with("session ended: The Airlock policy ended the session: The result held a private key."),
            "{ended}"
        );
        assert!(!ended.contains("BEGIN"), "{ended}");
        assert_eq!(ran(&calls).len(), 4, "the call ran; its result was withheld");
        proxy.stop().await;

        // Nobody answers the person's task before the deadline: the call fails closed.
        let short = Proxy::start(side, &python, &prefix, &policy, &calls, "1").await;
        let mut call = short.call("delete_file", json!({"path": "shared/new.txt"})).await;
        let failed = call.last_line().await;
        assert!(failed.starts_with("error: "), "{failed}");
        assert_eq!(ran(&calls).len(), 4, "the call that ran out of time never ran");
        short.stop().await;

        service.stop().await;
        worker.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

/// The calls the server ran, in order.
fn ran(calls: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(calls).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The plugin step `rewrite`: modifies every `write_file` to write under `sandbox/`.
async fn serve_rewrite(transport: &AmqpTransport, prefix: &str) {
    let topology = Topology::new(prefix);
    let results = Destination::queue(topology.results_queue());
    let mut tasks = transport.consume(&topology.step_queue("rewrite"), 8).await.unwrap();
    let transport = transport.clone();
    tokio::spawn(async move {
        while let Some(delivery) = tasks.next().await {
            let task = v1::StepTask::decode(delivery.message.body.as_ref()).unwrap();
            let Some(v1::request::Body::Approval(body)) = task.request.as_ref().and_then(|r| r.body.clone()) else {
                panic!("an approval")
            };
            let mut call = body.call.unwrap();
            let mut arguments: serde_json::Map<String, Value> = serde_json::from_str(&call.arguments_json).unwrap();
            let path = format!("sandbox/{}", arguments["path"].as_str().unwrap());
            arguments.insert("path".into(), path.into());
            call.arguments_json = Value::Object(arguments).to_string();
            let answer = v1::StepAnswer {
                decision: v1::DecisionKind::Modify.into(),
                modified: Some(call),
                decided_by: "rewrite".into(),
                ..Default::default()
            };
            let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
            transport.publish(&results, Message::new(result.encode_to_vec())).await.unwrap();
            delivery.ack().await.unwrap();
        }
    });
}

/// The proxy as one side runs it, and the server behind it.
struct Proxy {
    side: Side,
    python: PathBuf,
    calls: PathBuf,
    /// `airlock mcp` and its arguments but the server (stdio), or the endpoint (HTTP).
    target: Vec<String>,
    /// The server process (stdio: its HTTP endpoint) or the proxy process (HTTP).
    process: Child,
}

impl Proxy {
    async fn start(side: Side, python: &Path, prefix: &str, policy: &Path, calls: &Path, timeout: &str) -> Proxy {
        let keys = &TestKeys::get().dir;
        let example = repo().join("examples/agents/mcp_proxy");
        let mut proxy = vec![
            airlock_bin().display().to_string(),
            "mcp".into(),
            "--amqp".into(),
            amqp_url(),
            "--prefix".into(),
            prefix.into(),
            "--policy".into(),
            policy.display().to_string(),
            "--verify-key".into(),
            keys.join("fleet.pub").display().to_string(),
            "--progress-interval".into(),
            "0.2".into(),
            "--timeout".into(),
            timeout.into(),
        ];
        let server = example.join("server.py").display().to_string();
        match side {
            Side::Stdio => {
                let port = free_port();
                let process = Command::new(python)
                    .args([&server, "--http", &port.to_string()])
                    .env("MCP_EXAMPLE_CALLS", calls)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap();
                while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                proxy.extend(["--server-url".into(), format!("http://127.0.0.1:{port}/mcp")]);
                Proxy { side, python: python.into(), calls: calls.into(), target: proxy, process }
            }
            Side::Http => {
                proxy.extend([
                    "--listen".into(),
                    "127.0.0.1:0".into(),
                    "--".into(),
                    python.display().to_string(),
                    server,
                ]);
                let mut process = Command::new(&proxy[0])
                    .args(&proxy[1..])
                    .env("MCP_EXAMPLE_CALLS", calls)
                    .stdout(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap();
                let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
                let url = lines.next_line().await.unwrap().expect("the proxy prints its endpoint");
                Proxy { side, python: python.into(), calls: calls.into(), target: vec![url], process }
            }
        }
    }

    /// The SDK's client calling `tool` through the proxy, in a session of its own.
    async fn call(&self, tool: &str, arguments: Value) -> Call {
        let client = repo().join("examples/agents/mcp_proxy/client.py");
        let transport = match self.side {
            Side::Stdio => "stdio",
            Side::Http => "http",
        };
        let mut child = Command::new(&self.python)
            .arg(client)
            .args([transport, tool, &arguments.to_string(), "--"])
            .args(&self.target)
            .env("MCP_EXAMPLE_CALLS", &self.calls)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Call { _child: child, lines }
    }

    async fn stop(mut self) {
        let _ = self.process.kill().await;
    }
}

/// One client session's printed lines.
struct Call {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Call {
    async fn next_line(&mut self) -> String {
        self.lines.next_line().await.unwrap().expect("the client printed a line")
    }

    /// The line after any progress lines.
    async fn last_line(&mut self) -> String {
        loop {
            let line = self.next_line().await;
            if !line.starts_with("progress ") {
                return line;
            }
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
