//! Observability across processes: a runner (this test), a worker process and a reviewer
//! service export their spans to an OTLP receiver run by the test, and the spans of one
//! request share one trace id; the worker's metrics endpoint shows its counters move.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_telemetry::{Telemetry, TelemetryConfig, init};
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::{HANG_GUARD, TestKeys, airlock_bin, approval, broker, guarded, wait_for_consumers};
use airlock_transport::{Topology, Transport};
use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::process::Command;

/// Spans received: (service, span name, trace id).
type Received = Arc<Mutex<Vec<(String, String, String)>>>;

/// An OTLP/HTTP receiver that keeps what it is sent (JSON encoding).
async fn receiver() -> (SocketAddr, Received) {
    let received: Received = Arc::default();
    let store = received.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: axum::body::Bytes| {
            let store = store.clone();
            async move {
                let export: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                for resource in export["resourceSpans"].as_array().into_iter().flatten() {
                    let service = resource["resource"]["attributes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|a| a["key"] == "service.name")
                        .and_then(|a| a["value"]["stringValue"].as_str())
                        .unwrap_or_default()
                        .to_owned();
                    for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                        for span in scope["spans"].as_array().into_iter().flatten() {
                            let name = span["name"].as_str().unwrap_or_default().to_owned();
                            let trace = span["traceId"].as_str().unwrap_or_default().to_owned();
                            store.lock().unwrap().push((service.clone(), name, trace));
                        }
                    }
                }
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, received)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The tracing subscriber is global to a process: one test installs it for both cases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_and_metrics_across_the_fleet() {
    let Some(probe) = broker(&unique_prefix()).await else { return };
    probe.close().await;
    let (otlp, received) = receiver().await;
    let endpoint = format!("http://{otlp}");
    let telemetry = Arc::new(
        init(&TelemetryConfig {
            service: "runner".into(),
            default_filter: "warn".into(),
            json_logs: false,
            otlp_endpoint: Some(endpoint.clone()),
        })
        .unwrap(),
    );
    assert!(telemetry.exporting());
    one_trace_from_runner_to_worker_and_metrics_that_move(&endpoint, &received, &telemetry).await;
    the_reviewer_service_joins_the_trace(&endpoint, &received, &telemetry).await;
}

async fn one_trace_from_runner_to_worker_and_metrics_that_move(
    endpoint: &str,
    received: &Received,
    telemetry: &Arc<Telemetry>,
) {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    let (endpoint, received, telemetry) = (endpoint.to_owned(), received.clone(), telemetry.clone());
    guarded(Topology::new(prefix.as_str()).with_reply_queue("runner"), async move {
        let metrics_port = free_port();
        let mut worker = Command::new(airlock_bin())
            .args([
                "worker",
                "--amqp",
                &amqp_url(),
                "--prefix",
                &prefix,
                "--id",
                "traced",
                "--otlp-endpoint",
                &endpoint,
            ])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .args(TestKeys::get().worker_args())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        wait_for_consumers(&format!("{prefix}.requests"), 1).await;

        let config = ClientConfig {
            prefix: prefix.clone(),
            runner_id: "runner".into(),
            default_timeout: HANG_GUARD,
            replies: TestKeys::get().replies(),
            repeats: Repeats::default(),
        };
        let client = Client::connect(transport.clone(), config).await.unwrap();
        let policy = "approvers:\n  - name: auto\n    tools: \"*\"\n";
        for i in 0..3 {
            client
                .approve(approval("traced", &format!("c{i}"), json!({"function": "ls", "arguments": {}}), policy))
                .await
                .unwrap();
        }

        // The worker counts a decision once its publishes are confirmed, a moment after the
        // runner may have read it.
        let decided = r#"airlock_decisions_total{kind="approval",decision="approve",step="auto",timed_out="false"} 3"#;
        let metrics = poll_metrics(metrics_port, decided).await;
        assert!(metrics.contains(decided), "{metrics}");
        assert!(metrics.contains(r#"airlock_messages_total{source="requests"} 3"#), "{metrics}");
        assert!(metrics.contains("airlock_decision_latency_seconds_count{kind=\"approval\"} 3"), "{metrics}");

        telemetry.flush().await;
        let pid = worker.id().unwrap().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        tokio::time::timeout(HANG_GUARD, worker.wait()).await.unwrap().unwrap();

        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        let shared = loop {
            let spans = received.lock().unwrap().clone();
            let mut services: HashMap<&str, HashSet<&str>> = HashMap::new();
            for (service, name, trace) in &spans {
                if (service == "runner" && name == "airlock.client")
                    || (service == "airlock-worker" && name == "airlock.worker")
                {
                    services.entry(trace.as_str()).or_default().insert(service.as_str());
                }
            }
            let shared = services.values().filter(|s| s.len() == 2).count();
            if shared >= 3 || tokio::time::Instant::now() > deadline {
                break shared;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(shared, 3, "each request is one trace across runner and worker: {:?}", received.lock().unwrap());
    })
    .await;
}

/// The metrics page once it shows `line`, or as it stands when the hang guard runs out.
async fn poll_metrics(port: u16, line: &str) -> String {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    let mut metrics = metrics_page(port).await;
    while !metrics.contains(line) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        metrics = metrics_page(port).await;
    }
    metrics
}

/// The body of `GET http://127.0.0.1:port/metrics`.
async fn metrics_page(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

/// A request escalated to a person: the runner's, the worker's and the reviewer service's
/// spans share one trace, down to the worker that goes on once the person answered.
async fn the_reviewer_service_joins_the_trace(endpoint: &str, received: &Received, telemetry: &Arc<Telemetry>) {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    // The reviewer's queue of cancels is named after its --id.
    let fleet =
        Topology::new(prefix.as_str()).with_human_pool("ops").with_reply_queue("runner").with_reply_queue("traced");
    let (endpoint, received, telemetry) = (endpoint.to_owned(), received.clone(), telemetry.clone());
    guarded(fleet, async move {
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap();
        let tokens = dir.join("tokens.yaml");
        let added = std::process::Command::new(airlock_bin())
            .args(["reviewer", "add-token", "--name", "alice", "--pools", "ops", "--tokens"])
            .arg(&tokens)
            .output()
            .unwrap();
        let token = String::from_utf8(added.stdout).unwrap().trim().to_owned();
        let listen = format!("127.0.0.1:{}", free_port());
        let metrics_port = free_port();
        let store = format!("sqlite:{}", dir.join("tasks.db").display());
        let mut reviewer = Command::new(airlock_bin())
            .args(["reviewer", "--amqp", &amqp_url(), "--prefix", &prefix, "--pools", "ops", "--store", &store, "--id", "traced"])
            .args(["--listen", &listen, "--otlp-endpoint", &endpoint, "--tokens"])
            .arg(&tokens)
            .arg("--signing-key")
            .arg(TestKeys::get().dir.join("reviewer.key"))
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut worker = Command::new(airlock_bin())
            .args(["worker", "--amqp", &amqp_url(), "--prefix", &prefix, "--otlp-endpoint", &endpoint])
            .args(TestKeys::get().worker_args())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        wait_for_consumers(&format!("{prefix}.requests"), 1).await;
        wait_for_consumers(&format!("{prefix}.human.ops"), 1).await;

        let config = ClientConfig { prefix: prefix.clone(), runner_id: "runner".into(), default_timeout: HANG_GUARD, replies: TestKeys::get().replies(), repeats: Repeats::default() };
        let client = Client::connect(transport.clone(), config).await.unwrap();
        let policy = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n";
        let asking = tokio::spawn({
            let client = client.clone();
            async move { client.approve(approval("traced", "h1", json!({"function": "rm", "arguments": {}}), policy)).await }
        });

        // A person answers through the API.
        let auth = format!("Bearer {token}");
        let api = format!("http://{listen}/api/tasks");
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        let id = loop {
            let listed = airlock_reviewer::client::request("GET", &api, &[("Authorization", &auth)], None).await;
            if let Some(id) = listed.ok().and_then(|r| r.json()["tasks"][0]["id"].as_str().map(str::to_owned)) {
                break id;
            }
            assert!(tokio::time::Instant::now() < deadline, "the task never reached the reviewer");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let body = json!({"decision": "approve", "explanation": "fine"}).to_string();
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        let answered = airlock_reviewer::client::request("POST", &format!("{api}/{id}/decision"), &headers, Some(body.as_bytes()))
            .await
            .unwrap();
        assert_eq!(answered.status, 200, "{}", String::from_utf8_lossy(&answered.body));
        let decision = asking.await.unwrap().unwrap();
        assert_eq!((decision.decided_by.as_str(), decision.approver.as_str()), ("alice", "human"));
        // The reviewer counted the task it took and the answer it sent (once the broker confirmed
        // it, which may be a moment after the runner had the decision).
        let answered = r#"airlock_step_answers_total{step="human",decision="approve"} 1"#;
        let metrics = poll_metrics(metrics_port, answered).await;
        assert!(metrics.contains(answered), "{metrics}");
        assert!(metrics.contains(r#"airlock_messages_total{source="human.ops"} 1"#), "{metrics}");

        telemetry.flush().await;
        for child in [&mut worker, &mut reviewer] {
            let pid = child.id().unwrap().to_string();
            Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
            tokio::time::timeout(HANG_GUARD, child.wait()).await.unwrap().unwrap();
        }
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        loop {
            let spans = received.lock().unwrap().clone();
            let trace_of = |service: &str, name: &str| {
                spans.iter().filter(|(s, n, _)| s == service && n == name).map(|(_, _, t)| t.clone()).collect::<HashSet<_>>()
            };
            let runner = trace_of("runner", "airlock.client");
            // Two worker spans: the one that forwarded the task to the person, and the one that
            // went on with the chain once the person had answered.
            let worker_spans = |trace: &String| {
                spans.iter().filter(|(s, n, t)| s == "airlock-worker" && n == "airlock.worker" && t == trace).count()
            };
            let shared: Vec<&String> = runner
                .iter()
                .filter(|t| worker_spans(t) >= 2)
                .filter(|t| trace_of("airlock-reviewer", "airlock.reviewer").contains(*t))
                .collect();
            if !shared.is_empty() {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "no trace shared by runner, worker and reviewer: {spans:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let delete = |p: &std::path::Path| std::fs::remove_dir_all(p);
        let _ = delete(&dir);
    })
    .await;
}
