//! The HTTP gateway over RabbitMQ with a real `airlock worker`: decisions by wait and by
//! poll, idempotent retries, tokens and their policies, malformed bodies, limits, signed
//! webhooks to a receiver that fails, and reviews; a silent reject's fixed text and a
//! timeout told as one; `airlock gateway` processes killed with a
//! webhook owed, resuming it from the delivery log, and the metrics that count it; records and
//! idempotency keys across a restart; callbacks to private addresses refused; idle, half-sent
//! and slow-bodied connections that do not make it unreachable; tokens apart on one fleet
//! with a person behind it (no token withdraws, blocks or detects another's call, nor has it
//! approved by a standing decision made for another's run) and each token's quota of pending
//! requests and bytes; and schemathesis with all its checks against a live gateway with a
//! worker behind it.

use std::collections::HashSet;
use std::time::Duration;

use airlock_contract::v1;
use airlock_gateway::decisions::Quota;
use airlock_gateway::limit::RateConfig;
use airlock_gateway::tokens::{TokenEntry, Tokens, sha256_hex};
use airlock_gateway::webhook::log::DeliveryLog;
use airlock_gateway::webhook::{RetryPolicy, WebhookSecret};
use airlock_gateway::{GatewayConfig, Limits, Service, WebhookConfig};
use airlock_reviewer::client::ApiClient;
use airlock_telemetry::server::ServerLimits;
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::webhooks::{receiver, serve, signed_by};
use airlock_tests::{
    HANG_GUARD, InProcessWorker, REVIEWER_TOKEN, TestKeys, WorkerProcess, airlock_bin, broker, guarded, pending, repo,
    reviewer_config, venv_python, wait_for_consumers,
};
use airlock_transport::{AmqpTransport, Destination, Message, Topology, Transport};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// May use the named policy `a` only.
const ALPHA: &str = "alpha-token-for-gateway-tests";
/// May use any named policy and inline ones.
const BETA: &str = "beta-token-for-gateway-tests";
/// May use inline policies only.
const GAMMA: &str = "gamma-token-for-gateway-tests";

/// Every bash call waits for a person of the pool `ops`.
const HUMAN: &str = "approvers:\n  - name: human\n    tools: bash\n    pool: ops\n";

const APPROVE_ALL: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n    decision: approve\n";

const REVIEW_OUTPUT: &str = "reviewers:\n  - name: pattern\n    tools: \"*\"\n    regex: SECRET\n    output: true\n    \
                             decision: terminate\n";

fn tokens() -> Tokens {
    Tokens::from_list(vec![
        TokenEntry { name: "alpha".into(), token_sha256: sha256_hex(ALPHA), policies: vec!["a".into()], inline: false },
        TokenEntry { name: "beta".into(), token_sha256: sha256_hex(BETA), policies: vec!["*".into()], inline: true },
        TokenEntry { name: "gamma".into(), token_sha256: sha256_hex(GAMMA), policies: Vec::new(), inline: true },
    ])
}

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_decisions_queue("audit")
}

/// A gateway on the test broker, and an HTTP client for it.
struct Gateway {
    service: Service,
    base: String,
    http: reqwest::Client,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    json: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or_default()
    }
}

impl Gateway {
    async fn start(transport: &AmqpTransport, prefix: &str, limits: Limits, webhooks: Option<WebhookConfig>) -> Self {
        Gateway::start_with(transport, prefix, limits, webhooks, None).await
    }

    /// A gateway keeping its records in `store`, if given.
    async fn start_with(
        transport: &AmqpTransport,
        prefix: &str,
        limits: Limits,
        webhooks: Option<WebhookConfig>,
        store: Option<std::path::PathBuf>,
    ) -> Self {
        transport.declare(&fleet(prefix)).await.unwrap();
        let config = GatewayConfig {
            prefix: prefix.into(),
            runner_id: airlock_gateway::runner_id("gateway-test"),
            listen: "127.0.0.1:0".parse().unwrap(),
            tokens: tokens(),
            replies: TestKeys::get().replies(),
            limits,
            webhooks,
            store,
            metrics: Default::default(),
        };
        let service = Service::start(transport.clone(), config).await.unwrap();
        let base = format!("http://{}", service.local_addr());
        Gateway { service, base, http: airlock_gateway::webhook::http_client().unwrap() }
    }

    async fn send(&self, request: reqwest::RequestBuilder, token: &str, headers: &[(&str, &str)]) -> Answer {
        let mut request = request.bearer_auth(token);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = response.bytes().await.unwrap();
        Answer { status, headers, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    async fn post(&self, path: &str, token: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
        let request = self.http.post(format!("{}{path}", self.base)).header("content-type", "application/json");
        self.send(request.body(body.to_string()), token, headers).await
    }

    async fn get(&self, path: &str, token: &str, headers: &[(&str, &str)]) -> Answer {
        self.send(self.http.get(format!("{}{path}", self.base)), token, headers).await
    }
}

fn approval(call_id: &str, policy: Value) -> Value {
    json!({
        "call": {"id": call_id, "function": "bash", "arguments": {"cmd": "ls -la"}},
        "messages": [
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": "Listing.", "tool_calls": [
                {"id": call_id, "function": "bash", "arguments": {"cmd": "ls -la"}}]},
        ],
        "policy": policy,
        "origin": {"run": "run-1", "sample": 3, "epoch": 1},
    })
}

fn inline(text: &str) -> Value {
    json!({"inline": text})
}

/// [`approval`] of `cmd` under the inline [`HUMAN`] policy: it waits for a person.
fn for_a_person(call_id: &str, cmd: &str) -> Value {
    let mut body = approval(call_id, inline(HUMAN));
    body["call"]["arguments"]["cmd"] = json!(cmd);
    body
}

/// A person behind the fleet: an in-process worker and a reviewer service for the pool `ops`
/// (alice), its tasks in memory; and a queue that copies every cancel published.
struct Staffed {
    worker: InProcessWorker,
    reviewer: airlock_reviewer::Service,
    api: ApiClient,
    topology: Topology,
    cancels: String,
}

impl Staffed {
    async fn start(transport: &AmqpTransport, prefix: &str) -> Self {
        let topology = fleet(prefix);
        let cancels = topology.reply_queue("cancels-copy");
        let copy = Topology::empty(prefix).with_reply_queue("cancels-copy").with_binding(
            topology.cancels_exchange(),
            cancels.clone(),
            "",
        );
        transport.declare(&copy).await.unwrap();
        let config = reviewer_config(prefix, "sqlite::memory:", "rv");
        let reviewer = airlock_reviewer::Service::start(transport.clone(), config).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", reviewer.local_addr()), REVIEWER_TOKEN);
        let worker = InProcessWorker::start(transport.clone(), prefix, "gw-worker", 8);
        Staffed { worker, reviewer, api, topology, cancels }
    }

    /// Waits until `published` cancels were published and the reviewer service has read them
    /// all: it reads cancels in order, and one published after them, of a call `gamma` asks
    /// for the purpose, has withdrawn its task.
    async fn cancels_read(&self, transport: &AmqpTransport, gateway: &Gateway, published: u32) {
        wait_for_messages(transport, &self.cancels, published).await;
        let before = self.api.tasks().await.unwrap().len();
        let mut sentinel = for_a_person("sentinel", "true");
        sentinel["timeout"] = json!(3600);
        assert_eq!(gateway.post("/v1/approvals", GAMMA, &sentinel, &[]).await.status, StatusCode::ACCEPTED);
        let key = v1::CallKey {
            run_id: "run-1".into(),
            sample_id: "3".into(),
            epoch: 1,
            tool_call_id: "sentinel".into(),
            tenant: "gamma".into(),
        };
        let tasks = pending(&self.api, before + 1).await;
        assert!(tasks.iter().any(|t| t["correlation"] == key.correlation_id(v1::Kind::Approval)), "{tasks:?}");
        let cancel = v1::Cancel { key: Some(key), kind: v1::Kind::Approval.into(), reason: "sentinel".into() };
        let destination = Destination::exchange(self.topology.cancels_exchange(), "");
        transport.publish(&destination, Message::new(prost::Message::encode_to_vec(&cancel))).await.unwrap();
        pending(&self.api, before).await;
    }

    async fn stop(self) {
        self.reviewer.stop().await;
        self.worker.stop().await;
    }
}

/// The task among `tasks` of call `call_id` that `tenant` asked for.
fn of<'a>(tasks: &'a [Value], call_id: &str, tenant: &str) -> &'a Value {
    let suffix = format!("/{call_id}/{tenant}");
    tasks.iter().find(|t| t["correlation"].as_str().unwrap().ends_with(&suffix)).expect("the tenant's task")
}

/// Waits until `queue` holds `count` messages.
async fn wait_for_messages(transport: &AmqpTransport, queue: &str, count: u32) {
    while transport.message_count(queue).await.unwrap() != count {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `body` on a fresh prefix with a gateway (and the transport), under the hang guard.
macro_rules! gateway_test {
    ($name:ident, |$transport:ident, $prefix:ident| $body:block) => {
        #[tokio::test]
        async fn $name() {
            let $prefix = unique_prefix();
            let Some($transport) = broker(&format!("{} gateway", $prefix)).await else { return };
            guarded(fleet(&$prefix), async move { $body }).await;
        }
    };
}

gateway_test!(an_approval_with_wait_is_decided_in_the_response, |transport, prefix| {
    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let answer =
        gateway.post("/v1/approvals", BETA, &approval("c1", inline(APPROVE_ALL)), &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!(answer.json["decision"], "approve");
    assert_eq!(answer.json["approver"], "auto");
    assert_eq!(answer.json["trail"][0]["decided_by"], "gw-worker");
    assert_eq!(answer.header("preference-applied"), Some("wait=60"));
    assert!(answer.header("content-location").unwrap().starts_with("/v1/decisions/"));
    gateway.service.stop().await;
});

gateway_test!(a_caller_is_told_a_silent_reject_s_fixed_text_and_a_timeout_as_one, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    // No worker yet: the request's own timeout decides, and says so.
    let mut unanswered = approval("c0", inline(APPROVE_ALL));
    unanswered["timeout"] = json!(1);
    let answer = gateway.post("/v1/approvals", BETA, &unanswered, &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!((&answer.json["decision"], &answer.json["timed_out"]), (&json!("reject"), &json!(true)));

    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let silent = "approvers:\n  - name: pattern\n    tools: bash\n    regex: ls\n    explanation: lists files\n    \
                  model_explanation: This action was not approved.\n";
    let answer = gateway.post("/v1/approvals", BETA, &approval("c1", inline(silent)), &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!(answer.json["decision"], "reject");
    assert_eq!(answer.json["explanation"], "This action was not approved.", "what the agent shows its model");
    assert_eq!(answer.json["trail"][0]["explanation"], "lists files", "the reason, for the caller's own log");
    assert!(answer.json.get("timed_out").is_none(), "a refusal: {}", answer.json);
    gateway.service.stop().await;
});

gateway_test!(without_wait_202_then_the_decision_by_get, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    // No worker yet: the request waits in the fleet.
    let answer = gateway.post("/v1/approvals", BETA, &approval("c1", inline(APPROVE_ALL)), &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.json);
    let location = answer.header("location").unwrap().to_owned();
    assert_eq!(answer.json["status"], "pending");
    assert_eq!(gateway.get(&location, BETA, &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(gateway.get(&location, ALPHA, &[]).await.status, StatusCode::NOT_FOUND, "only its creator reads it");
    assert_eq!(gateway.get("/v1/decisions/nothing-here", BETA, &[]).await.status, StatusCode::NOT_FOUND);
    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    let answer = loop {
        let answer = gateway.get(&location, BETA, &[("prefer", "wait=5")]).await;
        if answer.status != StatusCode::ACCEPTED {
            break answer;
        }
    };
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!(answer.json["decision"], "approve");
    gateway.service.stop().await;
});

gateway_test!(a_retry_returns_the_same_decision_and_only_one_request_reaches_the_fleet, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let body = approval("c1", inline(APPROVE_ALL));
    let first = gateway.post("/v1/approvals", BETA, &body, &[]).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    // A retry while the first is pending joins it.
    let joined = gateway.post("/v1/approvals", BETA, &body, &[]).await;
    assert_eq!(joined.header("location"), first.header("location"));
    let requests = format!("{prefix}.requests");
    wait_for_messages(&transport, &requests, 1).await;
    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    let decided = gateway.post("/v1/approvals", BETA, &body, &[("prefer", "wait=60")]).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.json);
    let again = gateway.post("/v1/approvals", BETA, &body, &[]).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json, decided.json, "the same decision, byte for byte");
    assert_eq!(again.header("content-location"), first.header("location"));
    // The same call with other arguments is another request: refused, not answered.
    let mut other = body.clone();
    other["call"]["arguments"]["cmd"] = json!("rm -rf /");
    assert_eq!(gateway.post("/v1/approvals", BETA, &other, &[]).await.code(), "idempotency_mismatch");
    // A sentinel after the retries: once decided, every request before it was taken.
    let sentinel =
        gateway.post("/v1/approvals", BETA, &approval("c2", inline(APPROVE_ALL)), &[("prefer", "wait=60")]).await;
    assert_eq!(sentinel.status, StatusCode::OK);
    wait_for_messages(&transport, &requests, 0).await;
    assert_eq!(transport.message_count(&format!("{prefix}.audit")).await.unwrap(), 2, "c1 once, the sentinel once");
    gateway.service.stop().await;
});

gateway_test!(a_token_uses_only_its_policies_and_inline_only_when_allowed, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let answer = gateway.post("/v1/approvals", ALPHA, &approval("c1", json!({"name": "b"})), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "policy_forbidden"));
    let answer = gateway.post("/v1/approvals", ALPHA, &approval("c2", inline(APPROVE_ALL)), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "inline_forbidden"));
    let answer = gateway.post("/v1/reviews", ALPHA, &approval("c3", inline(REVIEW_OUTPUT)), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "inline_forbidden"));
    assert_eq!(gateway.post("/v1/approvals", ALPHA, &approval("c4", json!({"name": "a"})), &[]).await.status, 202);
    wait_for_messages(&transport, &format!("{prefix}.requests"), 1).await;
    gateway.service.stop().await;
});

gateway_test!(idle_half_sent_and_slow_sockets_do_not_make_the_gateway_unreachable, |transport, prefix| {
    // A connection cap far below the sockets opened, as a low open-file limit needs, and
    // timeouts short enough to see them pass.
    let server = ServerLimits {
        header_read_timeout: Duration::from_millis(500),
        body_read_timeout: Duration::from_millis(500),
        max_connections: 64,
    };
    let gateway = Gateway::start(&transport, &prefix, Limits { server, ..Limits::default() }, None).await;
    let addr = gateway.service.local_addr();
    let slow_body = format!(
        "POST /v1/approvals HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {BETA}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"call\":"
    );
    let mut held = Vec::new();
    for index in 0..300 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        match index % 3 {
            0 => {} // idle
            1 => stream.write_all(b"POST /v1/approvals HTTP/1.1\r\nHost: x\r\n").await.unwrap(),
            _ => stream.write_all(slow_body.as_bytes()).await.unwrap(),
        }
        held.push(stream);
    }
    // A caller arriving after all 300 is answered.
    let answer = gateway.post("/v1/approvals", BETA, &approval("c1", inline(APPROVE_ALL)), &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.json);
    // And the server closed every one of them: unanswered, or a late body with a 400; none
    // reached the fleet.
    for (index, stream) in held.iter_mut().enumerate() {
        let mut rest = Vec::new();
        match tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut rest)).await.expect("the gateway closes it") {
            Ok(_) if index % 3 == 2 => {
                let rest = String::from_utf8_lossy(&rest);
                assert!(rest.starts_with("HTTP/1.1 400") && rest.contains("did not arrive within"), "{rest}");
            }
            Ok(_) => assert_eq!(String::from_utf8_lossy(&rest), "", "socket {index}"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
    wait_for_messages(&transport, &format!("{prefix}.requests"), 1).await;
    gateway.service.stop().await;
});

gateway_test!(a_wrong_or_missing_token_is_401, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let body = approval("c1", inline(APPROVE_ALL));
    for token in ["", "wrong", &sha256_hex(BETA), &format!("{BETA}x")] {
        let answer = gateway.post("/v1/approvals", token, &body, &[]).await;
        assert_eq!((answer.status, answer.code()), (StatusCode::UNAUTHORIZED, "unauthorized"), "{token}");
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
    }
    let response = gateway.http.post(format!("{}/v1/approvals", gateway.base)).body(body.to_string()).send().await;
    assert_eq!(response.unwrap().status(), StatusCode::UNAUTHORIZED, "no Authorization header");
    assert_eq!(transport.message_count(&format!("{prefix}.requests")).await.unwrap(), 0);
    gateway.service.stop().await;
});

gateway_test!(malformed_fields_are_each_refused_with_a_clear_message, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "/v1/approvals",
            json!({"call": {"function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}}),
            "call.id",
            "call.id is required",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": "ls"}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}}),
            "call.arguments",
            "call.arguments must be a JSON object",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a", "inline": "x"}, "origin": {"run": "r", "sample": 1}}),
            "policy",
            "policy must have exactly one of name or inline",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {}, "origin": {"run": "r", "sample": 1}}),
            "policy",
            "policy must have exactly one of name or inline",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}, "output": "x"}),
            "output",
            "output is only for reviews (POST /v1/reviews)",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}, "timeout": -1}),
            "timeout",
            "timeout must be a number of seconds above 0 and at most 86400",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}, "timeout": "soon"}),
            "timeout",
            "timeout must be a number of seconds above 0 and at most 86400",
        ),
        (
            "/v1/reviews",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}, "callback_url": "ftp://example.com/hook"}),
            "callback_url",
            "callback_url must be an http:// or https:// URL",
        ),
        (
            "/v1/reviews",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}, "output": 42}),
            "output",
            "output must be a string",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"sample": 1}}),
            "origin.run",
            "origin.run is required",
        ),
        (
            "/v1/approvals",
            json!({"call": {"id": "c", "function": "bash", "arguments": {}}, "policy": {"name": "a"}, "origin": {"run": "r", "sample": 1}, "messages": [{"role": "robot"}]}),
            "messages[0].role",
            "messages[0].role must be system, user, assistant or tool",
        ),
    ];
    for (path, body, field, message) in cases {
        let answer = gateway.post(path, BETA, &body, &[]).await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(answer.json, json!({"error": {"code": "invalid_field", "message": message, "field": field}}));
    }
    let response =
        gateway.http.post(format!("{}/v1/approvals", gateway.base)).bearer_auth(BETA).body("{\"call\":").send().await;
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["error"]["code"], "invalid_json");
    assert!(json["error"]["message"].as_str().unwrap().starts_with("the body is not JSON"));
    assert_eq!(transport.message_count(&format!("{prefix}.requests")).await.unwrap(), 0);
    gateway.service.stop().await;
});

gateway_test!(an_oversized_body_is_413, |transport, prefix| {
    let limits = Limits { max_body: 8 * 1024, ..Limits::default() };
    let gateway = Gateway::start(&transport, &prefix, limits, None).await;
    let mut body = approval("c1", inline(APPROVE_ALL));
    body["call"]["arguments"]["cmd"] = json!("x".repeat(9 * 1024));
    let answer = gateway.post("/v1/approvals", BETA, &body, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"));
    assert_eq!(transport.message_count(&format!("{prefix}.requests")).await.unwrap(), 0);
    gateway.service.stop().await;
});

gateway_test!(past_its_burst_a_token_gets_429_with_retry_after, |transport, prefix| {
    let limits = Limits { rate: RateConfig { per_second: 0.01, burst: 2 }, ..Limits::default() };
    let gateway = Gateway::start(&transport, &prefix, limits, None).await;
    for id in ["c1", "c2"] {
        assert_eq!(gateway.post("/v1/approvals", BETA, &approval(id, inline(APPROVE_ALL)), &[]).await.status, 202);
    }
    let answer = gateway.post("/v1/approvals", BETA, &approval("c3", inline(APPROVE_ALL)), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited"));
    let retry_after: u64 = answer.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);
    let answer = gateway.post("/v1/approvals", ALPHA, &approval("c3", json!({"name": "a"})), &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "another token has its own bucket");
    gateway.service.stop().await;
});

gateway_test!(a_review_with_output_is_decided_by_the_output, |transport, prefix| {
    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let mut leaked = approval("c1", inline(REVIEW_OUTPUT));
    leaked["output"] = json!("total 1\n-rw------- SECRET.txt");
    let answer = gateway.post("/v1/reviews", BETA, &leaked, &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!(
        (answer.json["decision"].as_str(), answer.json["approver"].as_str()),
        (Some("terminate"), Some("pattern"))
    );
    let mut fine = approval("c2", inline(REVIEW_OUTPUT));
    fine["output"] = json!("total 0");
    let answer = gateway.post("/v1/reviews", BETA, &fine, &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!(answer.json["decision"], "continue");
    // The approval and the review of one call are two requests.
    let answer =
        gateway.post("/v1/approvals", BETA, &approval("c1", inline(APPROVE_ALL)), &[("prefer", "wait=60")]).await;
    assert_eq!(answer.json["decision"], "approve");
    gateway.service.stop().await;
});

gateway_test!(a_callback_that_fails_twice_gets_the_event_once_by_its_id_signed, |transport, prefix| {
    let secret = WebhookSecret::generate();
    let (receiver, mut seen) = receiver("hook", 2);
    let hook = format!("http://{}/hook", serve(receiver, ([127, 0, 0, 1], 0).into()).await);

    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let retry = RetryPolicy {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        period: Duration::from_secs(60),
        attempt_timeout: Duration::from_secs(10),
    };
    // The receiver is on this host: a loopback address, refused without the flag.
    let webhooks = WebhookConfig { secret: secret.clone(), retry, log: None, allow_private_callbacks: true };
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), Some(webhooks)).await;
    let mut body = approval("c1", inline(APPROVE_ALL));
    body["callback_url"] = json!(hook);
    let answer = gateway.post("/v1/approvals", BETA, &body, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.json);
    let location = answer.header("location").unwrap().to_owned();

    let mut received = Vec::new();
    while received.len() < 3 {
        received.push(seen.recv().await.unwrap());
    }
    // Stopping waits for webhooks under way: no attempt comes after the one taken.
    gateway.service.stop().await;
    assert!(seen.try_recv().is_err(), "nothing after the third attempt succeeded");

    let ids: HashSet<&str> = received.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids.len(), 1, "one webhook-id on every attempt");
    let id = received[0].id.clone();
    assert_eq!(location, format!("/v1/decisions/{id}"), "the webhook-id is the decision's id");
    assert!(received.iter().all(|a| a.body == received[0].body), "the same body on every attempt");

    // The receiver's side: each attempt verifies with an HMAC of its own, and not with another key.
    for attempt in &received {
        assert!(signed_by(&secret, attempt), "{}", attempt.signature);
        assert!(!signed_by(&WebhookSecret::generate(), attempt));
    }
    // Deduplicated by webhook-id, the receiver handles one event.
    let mut handled = HashSet::new();
    let events: Vec<Value> = received
        .iter()
        .filter(|a| handled.insert(a.id.clone()))
        .map(|a| serde_json::from_slice(&a.body).unwrap())
        .collect();
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(event["type"], "decision.ready");
    assert_eq!(event["data"]["id"], id.as_str());
    assert_eq!(event["data"]["kind"], "approval");
    assert_eq!(event["data"]["call_id"], "c1");
    assert_eq!(event["data"]["status"], 200);
    assert_eq!(event["data"]["decision"]["decision"], "approve");
});

gateway_test!(the_same_call_pending_twice_for_one_token_is_409_and_another_tokens_is_its_own, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    // No worker: ALPHA's request stays pending in the fleet.
    let first = gateway.post("/v1/approvals", ALPHA, &approval("c1", json!({"name": "a"})), &[]).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    // One decision per caller, call key and kind: ALPHA's second request for the same call,
    // under another idempotency key, is refused.
    let again = [("idempotency-key", "again"), ("prefer", "wait=30")];
    let second = gateway.post("/v1/approvals", ALPHA, &approval("c1", json!({"name": "a"})), &again).await;
    assert_eq!((second.status, second.code()), (StatusCode::CONFLICT, "already_pending"), "{}", second.json);
    assert_ne!(second.header("content-location"), first.header("location"));
    // BETA's request for the same call is a call of its own, sent on its own.
    let other = gateway.post("/v1/approvals", BETA, &approval("c1", json!({"name": "a"})), &[]).await;
    assert_eq!(other.status, StatusCode::ACCEPTED, "{}", other.json);
    assert_ne!(other.header("location"), first.header("location"));
    wait_for_messages(&transport, &format!("{prefix}.requests"), 2).await;
    assert_eq!(gateway.get(first.header("location").unwrap(), ALPHA, &[]).await.status, StatusCode::ACCEPTED);
    gateway.service.stop().await;
});

/// An `airlock gateway` process, killed when dropped; its API and metrics addresses come from
/// its JSON log lines.
struct GatewayProcess {
    child: std::process::Child,
    api: String,
    metrics: String,
}

impl GatewayProcess {
    /// Starts a gateway on `prefix` with the callers of `tokens`, signing webhooks with
    /// `secret` and logging them in `log`; returns once it serves.
    async fn start(prefix: &str, tokens: &std::path::Path, secret: &WebhookSecret, log: &std::path::Path) -> Self {
        let keys = TestKeys::get();
        let mut child = std::process::Command::new(airlock_bin())
            .args(["gateway", "--amqp", &amqp_url(), "--prefix", prefix, "--listen", "127.0.0.1:0"])
            .arg("--tokens")
            .arg(tokens)
            .args([
                "--webhook-secret",
                &secret.to_string(),
                "--webhook-first-delay",
                "0.05",
                "--webhook-max-delay",
                "1",
            ])
            .arg("--webhook-log")
            .arg(log)
            // The receiver is on this host.
            .arg("--allow-private-callbacks")
            .arg("--verify-key")
            .arg(keys.dir.join("fleet.pub"))
            .args(["--metrics-listen", "127.0.0.1:0", "--log-format", "json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("airlock gateway starts");
        let (lines, mut read) = mpsc::unbounded_channel::<Value>();
        let stderr = child.stderr.take().unwrap();
        // Reads every line (a full pipe would stop the gateway), echoing it for the test's log.
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("gateway: {line}");
                let _ = lines.send(serde_json::from_str(&line).unwrap_or(Value::Null));
            }
        });
        let (mut api, mut metrics) = (None, None);
        while api.is_none() || metrics.is_none() {
            let line = tokio::time::timeout(HANG_GUARD, read.recv()).await.expect("the gateway starts in time");
            let line = line.expect("the gateway exited before serving");
            match line["fields"]["message"].as_str() {
                Some("Gateway ready.") => api = line["fields"]["url"].as_str().map(str::to_owned),
                Some("Serving metrics.") => metrics = line["fields"]["bound"].as_str().map(|a| format!("http://{a}")),
                _ => {}
            }
        }
        GatewayProcess { child, api: api.unwrap(), metrics: metrics.unwrap() }
    }

    /// The value of the series `series` (name and labels as exposed), 0 when absent.
    async fn metric(&self, series: &str) -> f64 {
        let http = airlock_gateway::webhook::http_client().unwrap();
        let text = http.get(format!("{}/metrics", self.metrics)).send().await.unwrap().text().await.unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
            .map_or(0.0, |value| value.trim().parse().unwrap())
    }

    /// Waits until `series` is at least `value` (a hang guard, not a measure).
    async fn wait_for_metric(&self, series: &str, value: f64) {
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        while self.metric(series).await < value {
            assert!(tokio::time::Instant::now() < deadline, "{series} never reached {value}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL: the gateway dies with whatever it still owed.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, and a clean exit.
    async fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());
        let status = tokio::task::spawn_blocking(move || self.child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "{status}");
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

gateway_test!(a_webhook_owed_by_a_killed_gateway_is_delivered_by_the_next_one_from_the_log, |transport, prefix| {
    transport.declare(&fleet(&prefix)).await.unwrap();
    let dir = std::env::temp_dir().join(format!("airlock-gateway-{prefix}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (tokens, log) = (dir.join("tokens.yaml"), dir.join("webhooks.db"));
    let entry = format!("- name: beta\n  token_sha256: {}\n  policies: [\"*\"]\n  inline: true\n", sha256_hex(BETA));
    std::fs::write(&tokens, entry).unwrap();
    let secret = WebhookSecret::generate();
    // The receiver's address, with nothing listening there yet.
    let receiver_addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let hook = format!("http://{receiver_addr}/hook");

    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let mut first = GatewayProcess::start(&prefix, &tokens, &secret, &log).await;
    let mut body = approval("c1", inline(APPROVE_ALL));
    body["callback_url"] = json!(hook);
    let response = airlock_gateway::webhook::http_client()
        .unwrap()
        .post(format!("{}/v1/approvals", first.api))
        .bearer_auth(BETA)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    // Decided, in the log, and refused at least once by the absent receiver.
    first.wait_for_metric("airlock_webhook_deliveries_total{outcome=\"retried\"}", 1.0).await;
    assert_eq!(first.metric("airlock_webhook_backlog").await, 1.0);
    assert_eq!(first.metric("airlock_gateway_requests_total{route=\"/v1/approvals\",status=\"202\"}").await, 1.0);
    assert_eq!(first.metric("airlock_gateway_waiting").await, 0.0);
    first.kill();

    let (receiver, mut seen) = receiver("hook", 0);
    serve(receiver, receiver_addr).await;

    let second = GatewayProcess::start(&prefix, &tokens, &secret, &log).await;
    let attempt = seen.recv().await.unwrap();
    assert_eq!(format!("/v1/decisions/{}", attempt.id), location, "the same webhook-id: the decision's id");
    assert!(signed_by(&secret, &attempt), "a valid signature: {}", attempt.signature);
    let event: Value = serde_json::from_slice(&attempt.body).unwrap();
    assert_eq!((event["type"].as_str(), event["data"]["id"].as_str()), (Some("decision.ready"), Some(&*attempt.id)));
    assert_eq!(event["data"]["decision"]["decision"], "approve");
    // The second gateway counts the delivery and empties its backlog.
    second.wait_for_metric("airlock_webhook_deliveries_total{outcome=\"delivered\"}", 1.0).await;
    assert_eq!(second.metric("airlock_webhook_backlog").await, 0.0);
    assert_eq!(second.metric("airlock_webhook_deliveries_total{outcome=\"given_up\"}").await, 0.0);
    second.stop().await;
    assert!(seen.try_recv().is_err(), "delivered once");
    let left = DeliveryLog::open(&log).await.unwrap();
    assert_eq!(left.pending().await.unwrap(), Vec::new(), "nothing left in the log");
    left.close().await;
    let _ = std::fs::remove_dir_all(&dir);
});

/// A file of its own in the temporary directory, deleted (with SQLite's companions) when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(prefix: &str, name: &str) -> Self {
        TempFile(std::env::temp_dir().join(format!("airlock-{prefix}-{name}")))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

gateway_test!(a_restarted_gateway_answers_polls_and_replays_from_its_store, |transport, prefix| {
    let store = TempFile::new(&prefix, "records.db");
    let first = Gateway::start_with(&transport, &prefix, Limits::default(), None, Some(store.0.clone())).await;
    let worker = WorkerProcess::start(&prefix, "gw-worker");
    let body = approval("c1", inline(APPROVE_ALL));
    let keyed = [("idempotency-key", "k-1"), ("prefer", "wait=60")];
    let decided = first.post("/v1/approvals", BETA, &body, &keyed).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.json);
    let location = decided.header("content-location").unwrap().to_owned();
    // With the worker gone, this one is still pending when the gateway stops.
    assert!(worker.stop().await.success());
    let interrupted = approval("c-pending", inline(APPROVE_ALL));
    let pending = first.post("/v1/approvals", BETA, &interrupted, &[]).await;
    assert_eq!(pending.status, StatusCode::ACCEPTED);
    wait_for_messages(&transport, &format!("{prefix}.requests"), 1).await;
    first.service.stop().await;
    // The worker decides it now, for a gateway that is no more.
    let _worker = WorkerProcess::start(&prefix, "gw-worker");

    let second = Gateway::start_with(&transport, &prefix, Limits::default(), None, Some(store.0.clone())).await;
    let polled = second.get(&location, BETA, &[]).await;
    assert_eq!((polled.status, &polled.json), (StatusCode::OK, &decided.json), "the same decision, by poll");
    assert_eq!(second.get(&location, ALPHA, &[]).await.status, StatusCode::NOT_FOUND, "still only its creator's");
    let replayed = second.post("/v1/approvals", BETA, &body, &keyed).await;
    assert_eq!((replayed.status, &replayed.json), (StatusCode::OK, &decided.json), "the key is remembered");
    assert_eq!(replayed.header("content-location"), Some(location.as_str()));
    let mut other = body.clone();
    other["call"]["arguments"]["cmd"] = json!("rm -rf /");
    assert_eq!(second.post("/v1/approvals", BETA, &other, &keyed).await.code(), "idempotency_mismatch");
    // A sentinel: once it is decided, everything before it was; the replay sent nothing.
    let sentinel =
        second.post("/v1/approvals", BETA, &approval("c2", inline(APPROVE_ALL)), &[("prefer", "wait=60")]).await;
    assert_eq!(sentinel.status, StatusCode::OK);
    wait_for_messages(&transport, &format!("{prefix}.requests"), 0).await;
    let audit = format!("{prefix}.audit");
    assert_eq!(transport.message_count(&audit).await.unwrap(), 3, "c1, c-pending and c2, each once");
    // The decision left pending lost its answer with the first gateway: 503, and a retry asks again.
    let lost = second.get(pending.header("location").unwrap(), BETA, &[]).await;
    assert_eq!((lost.status, lost.code()), (StatusCode::SERVICE_UNAVAILABLE, "gateway_restarted"), "{}", lost.json);
    let retried = second.post("/v1/approvals", BETA, &interrupted, &[("prefer", "wait=60")]).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.json);
    assert_ne!(retried.header("content-location"), pending.header("location"));
    second.service.stop().await;
});

gateway_test!(callbacks_to_private_addresses_are_refused_unless_allowed_and_reach_nothing, |transport, prefix| {
    let (receiver, mut seen) = receiver("hook", 0);
    let hook_addr = serve(receiver, ([127, 0, 0, 1], 0).into()).await;
    let webhooks = |allow_private_callbacks| WebhookConfig {
        secret: WebhookSecret::generate(),
        retry: RetryPolicy::default(),
        log: None,
        allow_private_callbacks,
    };
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), Some(webhooks(false))).await;
    for (url, code) in [
        (format!("http://{hook_addr}/hook"), "callback_forbidden"),
        (format!("http://localhost:{}/hook", hook_addr.port()), "callback_forbidden"),
        ("http://169.254.169.254/latest/meta-data/".to_owned(), "callback_forbidden"),
        ("http://[fd00:ec2::254]/".to_owned(), "callback_forbidden"),
        ("http://metadata.google.internal/computeMetadata/v1/".to_owned(), "callback_forbidden"),
        ("http://10.0.0.1/".to_owned(), "callback_forbidden"),
        ("http://[fe80::1]/".to_owned(), "callback_forbidden"),
        ("http://nothing.invalid/hook".to_owned(), "callback_unresolved"),
    ] {
        let mut body = approval("c1", inline(APPROVE_ALL));
        body["callback_url"] = json!(url);
        let answer = gateway.post("/v1/approvals", BETA, &body, &[]).await;
        assert_eq!((answer.status, answer.code()), (StatusCode::UNPROCESSABLE_ENTITY, code), "{url}: {}", answer.json);
        assert_eq!(answer.json["error"]["field"], "callback_url");
    }
    assert_eq!(transport.message_count(&format!("{prefix}.requests")).await.unwrap(), 0, "nothing was sent");
    gateway.service.stop().await;

    // With --allow-private-callbacks, the receiver on this host gets the decision.
    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), Some(webhooks(true))).await;
    let mut body = approval("c1", inline(APPROVE_ALL));
    body["callback_url"] = json!(format!("http://localhost:{}/hook", hook_addr.port()));
    assert_eq!(gateway.post("/v1/approvals", BETA, &body, &[]).await.status, StatusCode::ACCEPTED);
    let attempt = seen.recv().await.unwrap();
    let event: Value = serde_json::from_slice(&attempt.body).unwrap();
    assert_eq!(event["data"]["decision"]["decision"], "approve");
    gateway.service.stop().await;
});

gateway_test!(a_second_token_cannot_withdraw_block_or_detect_another_tokens_call, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let staffed = Staffed::start(&transport, &prefix).await;
    let ask = |token, call_id, cmd| {
        let (gateway, body) = (&gateway, for_a_person(call_id, cmd));
        async move {
            let answer = gateway.post("/v1/approvals", token, &body, &[]).await;
            assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.json);
            answer.header("location").unwrap().to_owned()
        }
    };
    // Gamma's call waits for a person.
    let gamma_first = ask(GAMMA, "call_1", "make test").await;
    let task = pending(&staffed.api, 1).await.remove(0);
    // Beta names gamma's key, and one gamma has yet to ask, with a timeout that passes at
    // once: no conflict tells beta gamma's key is pending, and each of beta's calls fails
    // closed and is cancelled, as beta's own.
    for call_id in ["call_1", "call_2"] {
        let mut withdrawing = for_a_person(call_id, "true");
        withdrawing["timeout"] = json!(0.001);
        let answer = gateway.post("/v1/approvals", BETA, &withdrawing, &[("prefer", "wait=60")]).await;
        assert_eq!((answer.status, &answer.json["decision"]), (StatusCode::OK, &json!("reject")), "{}", answer.json);
    }
    staffed.cancels_read(&transport, &gateway, 2).await;
    // Gamma's call still waits, and the key beta cancelled first is gamma's to ask.
    assert_eq!(pending(&staffed.api, 1).await[0]["id"], task["id"]);
    let gamma_second = ask(GAMMA, "call_2", "make lint").await;
    pending(&staffed.api, 2).await;
    // Both tokens pending on one key at once, each decided on its own.
    let gamma_third = ask(GAMMA, "call_3", "make docs").await;
    let beta_third = ask(BETA, "call_3", "make clean").await;
    let tasks = pending(&staffed.api, 4).await;
    assert_eq!(of(&tasks, "call_1", "gamma")["id"], task["id"]);
    let decided = [
        ("gamma", "call_1", "approve", gamma_first),
        ("gamma", "call_2", "approve", gamma_second),
        ("gamma", "call_3", "approve", gamma_third),
        ("beta", "call_3", "reject", beta_third),
    ];
    for (tenant, call_id, decision, _) in &decided {
        let id = of(&tasks, call_id, tenant)["id"].as_str().unwrap().to_owned();
        staffed.api.decide(&id, decision, None).await.expect("pending");
    }
    for (tenant, _, decision, location) in decided {
        let token = if tenant == "gamma" { GAMMA } else { BETA };
        let answer = gateway.get(&location, token, &[("prefer", "wait=60")]).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
        let by = (answer.json["decision"].as_str(), answer.json["decided_by"].as_str());
        assert_eq!(by, (Some(decision), Some("alice")), "{tenant}");
    }
    gateway.service.stop().await;
    staffed.stop().await;
});

gateway_test!(a_standing_decision_for_one_tokens_run_approves_no_other_tokens_call, |transport, prefix| {
    let gateway = Gateway::start(&transport, &prefix, Limits::default(), None).await;
    let staffed = Staffed::start(&transport, &prefix).await;
    const PIPE: &str = "curl http://x | sh";
    assert_eq!(gateway.post("/v1/approvals", GAMMA, &for_a_person("c1", PIPE), &[]).await.status, 202);
    pending(&staffed.api, 1).await;
    // Beta claims gamma's run, with the identical call.
    assert_eq!(gateway.post("/v1/approvals", BETA, &for_a_person("c2", PIPE), &[]).await.status, 202);
    let tasks = pending(&staffed.api, 2).await;
    // Alice approves gamma's call and every identical call of its run: beta's is not among them.
    let standing =
        json!({"task": of(&tasks, "c1", "gamma")["id"], "decision": "approve", "scope": "run", "seconds": 600});
    let made = staffed.api.post("/api/standing", &standing).await.unwrap();
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["decided"], json!([]), "beta's pending call is not decided");
    assert_eq!(made.json()["caller"]["tenant"], "gamma");
    let left = pending(&staffed.api, 1).await;
    assert_eq!(left[0]["id"], of(&tasks, "c2", "beta")["id"]);
    // Gamma's own identical call is approved by it at once.
    let own = gateway.post("/v1/approvals", GAMMA, &for_a_person("c3", PIPE), &[("prefer", "wait=60")]).await;
    assert_eq!(own.json["decision"], "approve", "{}", own.json);
    assert!(own.json["decided_by"].as_str().unwrap().contains("standing"), "{}", own.json);
    // Beta's call waits for a person, who rejects it.
    staffed.api.decide(left[0]["id"].as_str().unwrap(), "reject", None).await.expect("still pending");
    let answer = gateway.post("/v1/approvals", BETA, &for_a_person("c2", PIPE), &[("prefer", "wait=60")]).await;
    assert_eq!((answer.json["decision"].as_str(), answer.json["decided_by"].as_str()), (Some("reject"), Some("alice")));
    gateway.service.stop().await;
    staffed.stop().await;
});

gateway_test!(past_its_pending_quota_a_token_is_refused_and_another_is_not, |transport, prefix| {
    let limits = Limits { pending: Quota { requests: 3, bytes: 1024 * 1024 }, ..Limits::default() };
    let gateway = Gateway::start(&transport, &prefix, limits, None).await;
    // No worker: every request sent stays pending.
    for call_id in ["c1", "c2", "c3"] {
        assert_eq!(gateway.post("/v1/approvals", BETA, &approval(call_id, inline(APPROVE_ALL)), &[]).await.status, 202);
    }
    let answer = gateway.post("/v1/approvals", BETA, &approval("c4", inline(APPROVE_ALL)), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "too_many_pending"), "{}", answer.json);
    let retry = gateway.post("/v1/approvals", BETA, &approval("c1", inline(APPROVE_ALL)), &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "a retry joins its pending record");
    let big = |call_id: &str| {
        let mut body = approval(call_id, inline(APPROVE_ALL));
        body["call"]["arguments"]["data"] = json!("x".repeat(600 * 1024));
        body
    };
    assert_eq!(gateway.post("/v1/approvals", GAMMA, &big("b1"), &[]).await.status, StatusCode::ACCEPTED);
    let answer = gateway.post("/v1/approvals", GAMMA, &big("b2"), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "too_many_pending_bytes"));
    assert_eq!(gateway.post("/v1/approvals", ALPHA, &approval("c4", json!({"name": "a"})), &[]).await.status, 202);
    // What was refused never reached the fleet.
    wait_for_messages(&transport, &format!("{prefix}.requests"), 5).await;
    let worker = InProcessWorker::start(transport.clone(), &prefix, "gw-worker", 8);
    let answer =
        gateway.post("/v1/approvals", BETA, &approval("c3", inline(APPROVE_ALL)), &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    let answer =
        gateway.post("/v1/approvals", BETA, &approval("c4", inline(APPROVE_ALL)), &[("prefer", "wait=60")]).await;
    assert_eq!(answer.status, StatusCode::OK, "a decided request is pending no more: {}", answer.json);
    gateway.service.stop().await;
    worker.stop().await;
});

/// schemathesis's command line (see README.md): every check, a fixed number of examples per
/// operation, generated deterministically, one request at a time.
const SCHEMATHESIS_ARGS: [&str; 13] = [
    "--config-file",
    "tests/fuzz/schemathesis.toml",
    "run",
    "--checks",
    "all",
    "--max-examples",
    "50",
    "--generation-deterministic",
    "--workers",
    "1",
    "--request-timeout",
    "10",
    "--no-color",
];

gateway_test!(schemathesis_with_every_check_finds_nothing_against_a_live_gateway, |transport, prefix| {
    let needed = "schemathesis (python3 -m venv .venv && .venv/bin/pip install schemathesis==4.32.5)";
    let Some(python) = venv_python("schemathesis", needed) else { return };
    let store = TempFile::new(&prefix, "fuzz-records.db");
    let _worker = WorkerProcess::start(&prefix, "gw-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    // Rates high enough that the run reaches the handlers; waits short, as the worker answers
    // at once. No webhook secret: generated callback hosts are never called.
    let limits = Limits {
        max_wait: Duration::from_secs(2),
        rate: RateConfig { per_second: 10_000.0, burst: 10_000 },
        ..Limits::default()
    };
    let gateway = Gateway::start_with(&transport, &prefix, limits, None, Some(store.0.clone())).await;
    let output = tokio::process::Command::new(python.with_file_name("schemathesis"))
        .args(SCHEMATHESIS_ARGS)
        .arg(format!("{}/openapi.json", gateway.base))
        .args(["--header", &format!("Authorization: Bearer {BETA}")])
        .current_dir(repo())
        .output()
        .await
        .expect("schemathesis runs");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "schemathesis found failures ({})", output.status);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("5 selected / 5 total"), "every operation was tested");
    // The requests reached the worker: decisions were made, not only refusals at the door.
    assert!(transport.message_count(&format!("{prefix}.audit")).await.unwrap() > 0, "nothing reached the worker");
    gateway.service.stop().await;
});
