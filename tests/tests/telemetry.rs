//! Observability across processes: a runner (this test) and a worker process export their
//! spans to an OTLP receiver run by the test, and the spans of one request share one trace
//! id; the worker's metrics endpoint shows its counters move.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_client::{Client, ClientConfig};
use airlock_telemetry::{TelemetryConfig, init};
use airlock_tests::{HANG_GUARD, airlock_bin, approval, broker, guarded, wait_for_consumers};
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_transport::Topology;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_runner_to_worker_and_metrics_that_move() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(Topology::new(prefix.as_str()).with_reply_queue("runner"), async move {
        let (otlp, received) = receiver().await;
        let endpoint = format!("http://{otlp}");
        let metrics_port = free_port();
        let mut worker = Command::new(airlock_bin())
            .args(["worker", "--amqp", &amqp_url(), "--prefix", &prefix, "--id", "traced", "--otlp-endpoint", &endpoint])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        wait_for_consumers(&format!("{prefix}.requests"), 1).await;

        let telemetry = init(&TelemetryConfig {
            service: "runner".into(),
            default_filter: "warn".into(),
            json_logs: false,
            otlp_endpoint: Some(endpoint),
        })
        .unwrap();
        assert!(telemetry.exporting());
        let config = ClientConfig { prefix: prefix.clone(), runner_id: "runner".into(), default_timeout: HANG_GUARD };
        let client = Client::connect(transport.clone(), config).await.unwrap();
        let policy = "approvers:\n  - name: auto\n    tools: \"*\"\n";
        for i in 0..3 {
            client.approve(approval("traced", &format!("c{i}"), json!({"function": "ls", "arguments": {}}), policy)).await.unwrap();
        }

        // The worker counts a decision once its publishes are confirmed, a moment after the
        // runner may have read it.
        let decided = r#"airlock_decisions_total{kind="approval",decision="approve",step="auto"} 3"#;
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        let mut metrics = metrics_page(metrics_port).await;
        while !metrics.contains(decided) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            metrics = metrics_page(metrics_port).await;
        }
        assert!(metrics.contains(decided), "{metrics}");
        assert!(metrics.contains(r#"airlock_messages_total{source="requests"} 3"#), "{metrics}");
        assert!(metrics.contains("airlock_decision_latency_seconds_count{kind=\"approval\"} 3"), "{metrics}");

        telemetry.shutdown().await;
        let pid = worker.id().unwrap().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        tokio::time::timeout(HANG_GUARD, worker.wait()).await.unwrap().unwrap();

        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        let shared = loop {
            let spans = received.lock().unwrap().clone();
            let mut services: HashMap<&str, HashSet<&str>> = HashMap::new();
            for (service, name, trace) in &spans {
                if (service == "runner" && name == "airlock.client") || (service == "airlock-worker" && name == "airlock.worker") {
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

/// The body of `GET http://127.0.0.1:port/metrics`.
async fn metrics_page(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}
