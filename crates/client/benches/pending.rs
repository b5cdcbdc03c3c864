//! Memory of a runner holding many pending calls: 100,000 approval requests of about 1.5 KB
//! published through one client to a fleet with no worker, so every one stays pending; the
//! process's resident memory is read once all are waiting. Needs the broker at
//! `AIRLOCK_AMQP_URL`; its queues are deleted at the end.
//!
//! `cargo bench -p airlock-client --bench pending` (`AIRLOCK_BENCH_PENDING=N` for another N).

use std::time::{Duration, Instant};

use airlock_client::{Client, ClientConfig};
use airlock_contract::v1;
use airlock_transport::{AmqpTransport, Topology, Transport};

fn resident_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        status.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
    };
    kb("VmRSS:").unwrap_or(0.0) / 1024.0
}

fn request(i: usize, padding: &str) -> v1::Request {
    let call = v1::ToolCall {
        id: format!("call-{i}"),
        function: "bash".into(),
        arguments_json: format!(r#"{{"cmd": "ls -la /workspace/{i}"}}"#),
        r#type: "function".into(),
        ..Default::default()
    };
    v1::Request {
        key: Some(v1::CallKey {
            run_id: "bench".into(),
            sample_id: format!("s{}", i % 1000),
            epoch: 1,
            tool_call_id: format!("call-{i}"),
        }),
        body: Some(v1::request::Body::Approval(v1::ApprovalRequest {
            message: padding.to_owned(),
            call: Some(call),
            ..Default::default()
        })),
        policy: Some(v1::Policy { source: Some(v1::policy::Source::Name("bench".into())), digest: String::new() }),
        ..Default::default()
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let url = std::env::var("AIRLOCK_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
        let count: usize = std::env::var("AIRLOCK_BENCH_PENDING").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
        let Ok(transport) = AmqpTransport::connect(&url).await else {
            eprintln!("skipping: no broker at {url}");
            return;
        };
        let prefix = format!("bench-pending-{}", std::process::id());
        let config = ClientConfig {
            prefix: prefix.clone(),
            runner_id: "runner".into(),
            default_timeout: Duration::from_secs(3600),
            fleet_keys: None,
        };
        let client = Client::connect(transport.clone(), config).await.expect("a client");
        let padding = "x".repeat(1_300);
        // What each waiting request's task holds before any heap data of its own.
        let future = std::mem::size_of_val(&client.decide(request(0, &padding), None));
        let before = resident_mb();
        let started = Instant::now();
        let mut waiting = Vec::with_capacity(count);
        for i in 0..count {
            let (client, request) = (client.clone(), request(i, &padding));
            waiting.push(tokio::spawn(async move { client.decide(request, None).await }));
        }
        // Every request confirmed by the broker and waiting in the queue: only pending state left.
        let queue = Topology::new(prefix.as_str()).requests_queue();
        while transport.message_count(&queue).await.unwrap_or(0) < count as u32 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let after = resident_mb();
        println!(
            "{count} pending calls ({} bytes each, encoded): resident {after:.0} MB (client and runtime {:.0} MB before; published in {:.1}s; a waiting request's future is {future} bytes)",
            prost::Message::encoded_len(&request(0, &padding)),
            before,
            started.elapsed().as_secs_f64()
        );
        for task in &waiting {
            task.abort();
        }
        client.close().await;
        let _ = transport.delete(&Topology::new(prefix.as_str())).await;
        transport.close().await;
    });
}
