use std::sync::Mutex;

use airlock_client::ClientError;
use airlock_contract::v1;
use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::{Value, json};
use tokio::sync::watch;
use tower::ServiceExt as _;

use super::*;
use crate::Limits;
use crate::decisions::Quota;
use crate::limit::RateConfig;
use crate::state::{Asking, Fleet};
use crate::tokens::{Tokens, sha256_hex};

/// A fleet that records what it is sent and answers once its gate opens: `approve`, or what a
/// request's call id asks for (`refuse`: a refusal, `pending`: already pending, `down`: not
/// sent, `closed`: the client closed as the gateway stops, `reject`: a reject saying `No.`).
struct FakeFleet {
    sent: Mutex<Vec<v1::Request>>,
    gate: watch::Sender<bool>,
}

impl FakeFleet {
    fn new(open: bool) -> Arc<Self> {
        Arc::new(FakeFleet { sent: Mutex::new(Vec::new()), gate: watch::channel(open).0 })
    }

    fn sent(&self) -> usize {
        self.sent.lock().unwrap().len()
    }
}

impl Fleet for FakeFleet {
    fn decide(&self, request: v1::Request, _timeout: Duration) -> Asking {
        self.sent.lock().unwrap().push(request.clone());
        let mut gate = self.gate.subscribe();
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            let key = request.key.unwrap_or_default();
            match key.tool_call_id.as_str() {
                "refuse" => {
                    return Err(ClientError::Refused {
                        code: "unknown_policy".into(),
                        message: "no such policy".into(),
                    });
                }
                "pending" => return Err(ClientError::AlreadyPending("approval/r/s/1/pending".into())),
                "down" => return Err(ClientError::Invalid("the broker is away")),
                "closed" => return Err(ClientError::Closed),
                _ => {}
            }
            let (decision, explanation) = match key.tool_call_id.as_str() {
                "reject" => (v1::DecisionKind::Reject, Some("No.".to_owned())),
                _ => (v1::DecisionKind::Approve, None),
            };
            Ok(v1::Decision {
                decision_id: format!("d-{}", key.tool_call_id),
                key: Some(key),
                decision: decision.into(),
                explanation,
                approver: "auto".into(),
                ..Default::default()
            })
        })
    }

    fn close(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}

const ALPHA: &str = "alpha-token";
const BETA: &str = "beta-token";

fn shared(fleet: Arc<FakeFleet>, limits: Limits) -> Arc<Shared> {
    let tokens = Tokens::from_list(vec![
        TokenEntry { name: "alpha".into(), token_sha256: sha256_hex(ALPHA), policies: vec!["a".into()], inline: false },
        TokenEntry { name: "beta".into(), token_sha256: sha256_hex(BETA), policies: vec!["*".into()], inline: true },
    ]);
    Arc::new(Shared::new(fleet, tokens, limits, None, Default::default()))
}

fn limits() -> Limits {
    Limits { max_body: 4096, max_wait: Duration::from_secs(30), ..Limits::default() }
}

fn body(call_id: &str, policy: &str) -> Value {
    json!({
        "call": {"id": call_id, "function": "bash", "arguments": {"cmd": "ls"}},
        "policy": {"name": policy},
        "origin": {"run": "r", "sample": "s", "epoch": 1},
    })
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

async fn call(
    shared: &Arc<Shared>,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(body.map_or_else(Body::empty, Body::from)).unwrap();
    let response = app(shared.clone()).oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    Answer { status: parts.status, headers: parts.headers, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
}

async fn post(shared: &Arc<Shared>, path: &str, token: &str, body: &Value, extra: &[(&str, &str)]) -> Answer {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("authorization", auth.as_str()), ("content-type", "application/json")];
    headers.extend_from_slice(extra);
    call(shared, Method::POST, path, &headers, Some(body.to_string().into_bytes())).await
}

async fn get(shared: &Arc<Shared>, path: &str, token: &str, extra: &[(&str, &str)]) -> Answer {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("authorization", auth.as_str())];
    headers.extend_from_slice(extra);
    call(shared, Method::GET, path, &headers, None).await
}

#[tokio::test]
async fn no_token_or_a_wrong_one_is_401_and_reaches_nothing() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let body = body("c1", "a");
    for headers in [
        vec![],
        vec![("authorization", "Bearer nope")],
        vec![("authorization", ALPHA)],
        vec![("authorization", "Basic YWxwaGEtdG9rZW4=")],
    ] {
        let answer = call(&shared, Method::POST, "/v1/approvals", &headers, Some(body.to_string().into_bytes())).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{headers:?}");
        assert_eq!(answer.code(), "unauthorized");
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(get(&shared, "/v1/decisions/x", "nope", &[]).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(fleet.sent(), 0);
}

#[tokio::test]
async fn a_token_uses_only_its_policies_and_inline_only_when_allowed() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let answer = post(&shared, "/v1/approvals", ALPHA, &body("c1", "b"), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "policy_forbidden"));
    let mut inline = body("c2", "a");
    inline["policy"] = json!({"inline": "approvers: []\n"});
    let answer = post(&shared, "/v1/approvals", ALPHA, &inline, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "inline_forbidden"));
    assert_eq!(fleet.sent(), 0, "nothing refused reaches the fleet");
    assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body("c3", "a"), &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(post(&shared, "/v1/approvals", BETA, &body("c4", "b"), &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(post(&shared, "/v1/approvals", BETA, &inline, &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(fleet.sent(), 3);
}

#[tokio::test]
async fn malformed_bodies_are_refused_with_the_field_and_reach_nothing() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let mut no_id = body("c1", "a");
    no_id["call"].as_object_mut().unwrap().remove("id");
    let answer = post(&shared, "/v1/approvals", ALPHA, &no_id, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"));
    assert_eq!(answer.json["error"]["field"], "call.id");
    assert_eq!(answer.json["error"]["message"], "call.id is required");
    let mut output = body("c1", "a");
    output["output"] = json!("x");
    let answer = post(&shared, "/v1/approvals", ALPHA, &output, &[]).await;
    assert_eq!(answer.json["error"]["field"], "output");
    let mut callback = body("c1", "a");
    callback["callback_url"] = json!("https://example.com/hook");
    let answer = post(&shared, "/v1/approvals", ALPHA, &callback, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::UNPROCESSABLE_ENTITY, "callbacks_disabled"));
    let auth = format!("Bearer {ALPHA}");
    let answer =
        call(&shared, Method::POST, "/v1/approvals", &[("authorization", &auth)], Some(b"{nope".to_vec())).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::BAD_REQUEST, "invalid_json"));
    let answer = post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[("idempotency-key", "")]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::BAD_REQUEST, "invalid_idempotency_key"));
    assert_eq!(fleet.sent(), 0);
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let mut big = body("c1", "a");
    big["call"]["arguments"]["cmd"] = json!("x".repeat(5000));
    let answer = post(&shared, "/v1/approvals", ALPHA, &big, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"));
    assert_eq!(fleet.sent(), 0);
}

#[tokio::test(start_paused = true)]
async fn past_its_burst_a_token_gets_429_with_retry_after_and_others_do_not() {
    let fleet = FakeFleet::new(true);
    let limits = Limits { rate: RateConfig { per_second: 0.5, burst: 2 }, ..limits() };
    let shared = shared(fleet.clone(), limits);
    for id in ["c1", "c2"] {
        assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body(id, "a"), &[]).await.status, StatusCode::ACCEPTED);
    }
    let answer = post(&shared, "/v1/approvals", ALPHA, &body("c3", "a"), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited"));
    assert_eq!(answer.header("retry-after"), Some("2"));
    assert_eq!(get(&shared, "/v1/decisions/x", ALPHA, &[]).await.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(post(&shared, "/v1/approvals", BETA, &body("c3", "a"), &[]).await.status, StatusCode::ACCEPTED);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body("c3", "a"), &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(fleet.sent(), 4);
}

#[tokio::test(start_paused = true)]
async fn with_wait_the_decision_comes_in_the_response() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let answer = post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[("prefer", "wait=10")]).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json["decision"], "approve");
    assert_eq!(answer.json["decision_id"], "d-c1");
    assert_eq!(answer.header("preference-applied"), Some("wait=10"));
    assert!(answer.header("content-location").unwrap().starts_with("/v1/decisions/"));
}

#[tokio::test(start_paused = true)]
async fn without_a_decision_in_time_202_then_the_decision_by_get_to_its_owner_only() {
    let fleet = FakeFleet::new(false);
    let shared = shared(fleet.clone(), limits());
    let answer =
        post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[("prefer", "respond-async, wait=600")]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED);
    assert_eq!(answer.header("preference-applied"), Some("wait=30"), "capped at the maximum");
    let location = answer.header("location").unwrap().to_owned();
    assert_eq!(answer.json["location"], location.as_str());
    assert_eq!(answer.json["status"], "pending");
    let answer = post(&shared, "/v1/approvals", ALPHA, &body("c2", "a"), &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED);
    assert!(answer.header("preference-applied").is_none());
    assert_eq!(get(&shared, &location, ALPHA, &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(get(&shared, &location, BETA, &[]).await.status, StatusCode::NOT_FOUND, "another token's decision");
    assert_eq!(get(&shared, "/v1/decisions/unknown", ALPHA, &[]).await.status, StatusCode::NOT_FOUND);
    fleet.gate.send_replace(true);
    let answer = get(&shared, &location, ALPHA, &[("prefer", "wait=5")]).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json["decision"], "approve");
}

#[tokio::test(start_paused = true)]
async fn a_retry_joins_or_returns_the_first_request_and_never_sends_again() {
    let fleet = FakeFleet::new(false);
    let shared = shared(fleet.clone(), limits());
    let first = post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[]).await;
    let pending = post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[]).await;
    assert_eq!(first.header("location"), pending.header("location"), "a retry while pending joins it");
    fleet.gate.send_replace(true);
    let done = post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[("prefer", "wait=1")]).await;
    assert_eq!(done.status, StatusCode::OK);
    assert_eq!(done.header("content-location"), first.header("location"));
    assert_eq!(fleet.sent(), 1);
    // The same call key with other content is another request, refused.
    let mut other = body("c1", "a");
    other["call"]["arguments"]["cmd"] = json!("rm -rf /");
    let answer = post(&shared, "/v1/approvals", ALPHA, &other, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch"));
    // An Idempotency-Key names the request instead of its call key.
    let keyed = [("idempotency-key", "k-1"), ("prefer", "wait=1")];
    let a = post(&shared, "/v1/approvals", ALPHA, &body("c2", "a"), &keyed).await;
    let b = post(&shared, "/v1/approvals", ALPHA, &body("c2", "a"), &keyed).await;
    assert_eq!((a.status, a.json.clone()), (b.status, b.json.clone()));
    assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body("c3", "a"), &keyed).await.code(), "idempotency_mismatch");
    // Another token's identical request is its own.
    let beta = post(&shared, "/v1/approvals", BETA, &body("c1", "a"), &[("prefer", "wait=1")]).await;
    assert_eq!(beta.status, StatusCode::OK);
    assert_ne!(beta.header("content-location"), first.header("location"));
    assert_eq!(fleet.sent(), 3);
}

#[tokio::test(start_paused = true)]
async fn each_token_asks_in_its_own_namespace() {
    let fleet = FakeFleet::new(false);
    let shared = shared(fleet.clone(), limits());
    for token in [ALPHA, BETA] {
        assert_eq!(post(&shared, "/v1/approvals", token, &body("c1", "a"), &[]).await.status, StatusCode::ACCEPTED);
    }
    let sent = fleet.sent.lock().unwrap().clone();
    let keys: Vec<v1::CallKey> = sent.iter().map(|request| request.key.clone().unwrap()).collect();
    assert_eq!(keys.iter().map(|key| key.tenant.as_str()).collect::<Vec<_>>(), ["alpha", "beta"]);
    assert_eq!(keys[0].correlation_id(v1::Kind::Approval), "approval/r/s/1/c1/alpha");
    assert_ne!(keys[0].correlation_id(v1::Kind::Approval), keys[1].correlation_id(v1::Kind::Approval));
}

#[tokio::test(start_paused = true)]
async fn past_its_pending_quota_a_token_gets_429_and_others_do_not() {
    let fleet = FakeFleet::new(false);
    let pending = Quota { requests: 2, bytes: 3200 };
    let shared = shared(fleet.clone(), Limits { pending, ..limits() });
    for id in ["c1", "c2"] {
        assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body(id, "a"), &[]).await.status, StatusCode::ACCEPTED);
    }
    let answer = post(&shared, "/v1/approvals", ALPHA, &body("c3", "a"), &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "too_many_pending"));
    let retry = post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "a retry joins its record");
    assert_eq!(post(&shared, "/v1/approvals", BETA, &body("c3", "a"), &[]).await.status, StatusCode::ACCEPTED);
    // A body that would pass the bytes pending is refused, whatever the count.
    let mut big = body("c4", "a");
    big["call"]["arguments"]["cmd"] = json!("x".repeat(3000));
    let answer = post(&shared, "/v1/approvals", BETA, &big, &[]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "too_many_pending_bytes"));
    assert_eq!(fleet.sent(), 3);
    // Decided requests are pending no more.
    fleet.gate.send_replace(true);
    let wait = [("prefer", "wait=1")];
    for (token, id) in [(ALPHA, "c1"), (ALPHA, "c2"), (BETA, "c3")] {
        assert_eq!(post(&shared, "/v1/approvals", token, &body(id, "a"), &wait).await.status, StatusCode::OK);
    }
    assert_eq!(post(&shared, "/v1/approvals", BETA, &big, &wait).await.status, StatusCode::OK);
    assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body("c3", "a"), &wait).await.status, StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_from_the_fleet_is_422_with_its_code() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let answer = post(&shared, "/v1/reviews", ALPHA, &body("refuse", "a"), &[("prefer", "wait=1")]).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::UNPROCESSABLE_ENTITY, "unknown_policy"));
}

#[test]
fn prefer_wait_reads_rfc_7240() {
    let max = Duration::from_secs(60);
    let wait = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(PREFER, HeaderValue::from_str(value).unwrap());
        prefer_wait(&headers, max).map(|d| d.as_secs())
    };
    assert_eq!(wait("wait=5"), Some(5));
    assert_eq!(wait("respond-async, Wait=7"), Some(7));
    assert_eq!(wait("wait=\"9\"; x=y"), Some(9));
    assert_eq!(wait("wait=1000"), Some(60));
    assert_eq!(wait("wait=soon"), None);
    assert_eq!(wait("handling=lenient"), None);
    assert_eq!(prefer_wait(&HeaderMap::new(), max), None);
}

async fn served_document(shared: &Arc<Shared>) -> Value {
    let response = app(shared.clone())
        .oneshot(Request::builder().uri("/openapi.json").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let served = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    serde_json::from_slice(&served).unwrap()
}

#[tokio::test]
async fn the_served_document_is_the_committed_one_with_the_limits_in_force() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/gateway.openapi.json"))
        .expect("docs/gateway.openapi.json");
    let committed: Value = serde_json::from_str(&committed).unwrap();
    // The committed document holds the default limits.
    let served = served_document(&shared(FakeFleet::new(true), limits())).await;
    assert!(served == committed, "the default gateway serves the committed document");
    let longer = Limits { max_timeout: Duration::from_secs(600), ..limits() };
    let served = served_document(&shared(FakeFleet::new(true), longer)).await;
    assert_eq!(served["components"]["schemas"]["Timeout"]["maximum"], json!(600));
    let shared = shared(FakeFleet::new(true), longer);
    let mut body = body("c1", "a");
    body["timeout"] = json!(601);
    let answer = post(&shared, "/v1/approvals", ALPHA, &body, &[]).await;
    assert_eq!(
        (answer.status, answer.json["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("timeout"))
    );
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes() {
    let shared = shared(FakeFleet::new(true), limits());
    let document = served_document(&shared).await;
    assert_eq!(document["openapi"], "3.1.0");
    let mut listed: Vec<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| item.as_object().unwrap().keys().map(move |method| (method.clone(), path.clone())))
        .collect();
    listed.sort();
    let mut routes: Vec<(String, String)> =
        super::served().into_iter().map(|r| (r.method.to_owned(), r.path.to_owned())).collect();
    routes.sort();
    assert_eq!(routes, listed);
    // And each is served (not the fallback's 404 or 405).
    for (method, path) in &listed {
        let uri = path.replace("{id}", "x");
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let answer = call(&shared, method, &uri, &[], None).await;
        assert!(!matches!(answer.code(), "not_found" | "method_not_allowed"), "{uri}: {:?}", answer.json);
    }
    let answer = call(&shared, Method::GET, "/v1/nothing", &[], None).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::NOT_FOUND, "not_found"));
    let answer = call(&shared, Method::DELETE, "/v1/approvals", &[], None).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"));
}

#[tokio::test(start_paused = true)]
async fn answers_are_counted_by_route_and_status_and_waiting_requests_by_the_gauge() {
    let fleet = FakeFleet::new(false);
    let shared = shared(fleet.clone(), limits());
    assert_eq!(post(&shared, "/v1/approvals", ALPHA, &body("c1", "a"), &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(post(&shared, "/v1/approvals", "wrong", &body("c2", "a"), &[]).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(&shared, "/v1/decisions/nothing", ALPHA, &[]).await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(&shared, "/nowhere", ALPHA, &[]).await.status, StatusCode::NOT_FOUND);
    assert_eq!(shared.metrics.gateway_waiting.get(), 1, "c1 is with the fleet");
    let text = shared.metrics.render();
    for line in [
        "airlock_gateway_requests_total{route=\"/v1/approvals\",status=\"202\"} 1",
        "airlock_gateway_requests_total{route=\"/v1/approvals\",status=\"401\"} 1",
        "airlock_gateway_requests_total{route=\"/v1/decisions/{id}\",status=\"404\"} 1",
        "airlock_gateway_requests_total{route=\"unmatched\",status=\"404\"} 1",
        "airlock_gateway_waiting 1",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    fleet.gate.send_replace(true);
    shared.tasks.close();
    shared.tasks.wait().await;
    assert_eq!(shared.metrics.gateway_waiting.get(), 0, "decided");
}

/// Every status and code a route sends, produced by real requests, against the served
/// document: each status is listed for its operation, and its description names the code.
#[tokio::test(start_paused = true)]
async fn every_status_and_code_the_handlers_send_is_in_the_document() {
    let fleet = FakeFleet::new(true);
    let webhooks = crate::webhook::Webhooks::new(
        crate::webhook::WebhookSecret::generate(),
        crate::webhook::RetryPolicy::default(),
        Default::default(),
        false,
    )
    .unwrap();
    let tokens = shared(fleet.clone(), limits()).tokens.clone();
    let shared = Arc::new(Shared::new(fleet.clone(), tokens.clone(), limits(), Some(webhooks), Default::default()));
    let limited = Limits { rate: RateConfig { per_second: 0.001, burst: 1 }, ..limits() };
    let limited = Arc::new(Shared::new(fleet, tokens, limited, None, Default::default()));
    let document = served_document(&shared).await;
    let auth = format!("Bearer {ALPHA}");
    let wait = [("prefer", "wait=1")];
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = body("c-with", "a");
        change(&mut body);
        body
    };
    let raw = |headers: Vec<(&'static str, String)>, bytes: &[u8]| (headers, bytes.to_vec());

    let mut seen: Vec<(&str, Answer)> = Vec::new();
    let approvals = "/v1/approvals";
    seen.push((approvals, post(&shared, approvals, ALPHA, &body("c-wait", "a"), &wait).await));
    let gate_closed = FakeFleet::new(false);
    let pending_shared = Arc::new(Shared::new(gate_closed, shared.tokens.clone(), limits(), None, Default::default()));
    let pending = post(&pending_shared, approvals, ALPHA, &body("c-pending", "a"), &[]).await;
    let pending_location = pending.header("location").unwrap().to_owned();
    seen.push((approvals, pending));
    for (headers, bytes) in [
        raw(vec![], b"{}"),
        raw(vec![("authorization", auth.clone())], b"{nope"),
        raw(vec![("authorization", auth.clone()), ("content-type", "text/plain".into())], b"{}"),
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        seen.push((approvals, call(&shared, Method::POST, approvals, &headers, Some(bytes)).await));
    }
    seen.push((approvals, post(&shared, approvals, ALPHA, &body("c-key", "a"), &[("idempotency-key", "a b")]).await));
    seen.push((approvals, post(&shared, approvals, ALPHA, &body("c-b", "b"), &[]).await));
    seen.push((
        approvals,
        post(&shared, approvals, ALPHA, &with(&|b| b["policy"] = json!({"inline": "x"})), &[]).await,
    ));
    seen.push((approvals, post(&shared, approvals, ALPHA, &body("pending", "a"), &wait).await));
    seen.push((
        approvals,
        post(&shared, approvals, ALPHA, &with(&|b| b["call"]["id"] = json!("x".repeat(5000))), &[]).await,
    ));
    seen.push((approvals, post(&shared, approvals, ALPHA, &with(&|b| b["timeout"] = json!(null)), &[]).await));
    let mut other = body("c-wait", "a");
    other["call"]["arguments"] = json!({"x": 1});
    seen.push((approvals, post(&shared, approvals, ALPHA, &other, &[]).await));
    seen.push((
        approvals,
        post(&shared, approvals, ALPHA, &with(&|b| b["callback_url"] = json!("http://127.0.0.1:9/h")), &[]).await,
    ));
    let unresolved = with(&|b| b["callback_url"] = json!("http://nothing.invalid/h"));
    seen.push((approvals, post(&shared, approvals, ALPHA, &unresolved, &[]).await));
    let callback = with(&|b| b["callback_url"] = json!("https://93.184.215.14/h"));
    seen.push((approvals, post(&pending_shared, approvals, ALPHA, &callback, &[]).await));
    seen.push((approvals, post(&shared, approvals, ALPHA, &body("refuse", "a"), &wait).await));
    seen.push((approvals, post(&shared, approvals, ALPHA, &body("down", "a"), &wait).await));
    seen.push((approvals, post(&limited, approvals, ALPHA, &body("c-rate", "a"), &[]).await));
    seen.push((approvals, post(&limited, approvals, ALPHA, &body("c-rate2", "a"), &[]).await));
    let full = Limits { pending: Quota { requests: 1, bytes: 3000 }, ..limits() };
    let full = Arc::new(Shared::new(FakeFleet::new(false), shared.tokens.clone(), full, None, Default::default()));
    post(&full, approvals, ALPHA, &body("c-full", "a"), &[]).await;
    seen.push((approvals, post(&full, approvals, ALPHA, &body("c-full2", "a"), &[]).await));
    let big = with(&|b| b["call"]["arguments"]["cmd"] = json!("x".repeat(3000)));
    seen.push((approvals, post(&full, approvals, BETA, &big, &[]).await));

    let hooks = CLAUDE_CODE_HOOKS;
    let hook_path = format!("{hooks}?policy=a");
    seen.push((hooks, post(&shared, &hook_path, ALPHA, &hook("PreToolUse", "h-1"), &[]).await));
    seen.push((hooks, post(&shared, &format!("{hooks}?policy=b"), ALPHA, &hook("PreToolUse", "h-2"), &[]).await));
    seen.push((hooks, post(&shared, hooks, ALPHA, &hook("PreToolUse", "h-3"), &[]).await));
    seen.push((hooks, post(&shared, &hook_path, ALPHA, &hook("Stop", "h-4"), &[]).await));
    seen.push((hooks, post(&shared, &hook_path, "wrong", &hook("PreToolUse", "h-5"), &[]).await));
    let headers = [("authorization", auth.as_str())];
    seen.push((hooks, call(&shared, Method::POST, &hook_path, &headers, Some(b"{nope".to_vec())).await));
    let mut other = hook("PreToolUse", "h-1");
    other["tool_input"] = json!({"command": "rm"});
    seen.push((hooks, post(&shared, &hook_path, ALPHA, &other, &[]).await));

    let decision = "/v1/decisions/{id}";
    let mut stored = Vec::new();
    for id in ["c-wait", "refuse", "pending", "down", "closed"] {
        let answer = post(&shared, approvals, ALPHA, &body(id, "a"), &wait).await;
        stored.push(answer.header("content-location").expect("settled").to_owned());
    }
    for location in &stored {
        seen.push((decision, get(&shared, location, ALPHA, &[]).await));
    }
    seen.push((decision, get(&pending_shared, &pending_location, ALPHA, &[]).await));
    seen.push((decision, get(&shared, "/v1/decisions/nothing", ALPHA, &[]).await));
    seen.push((decision, get(&shared, "/v1/decisions/%FF", ALPHA, &[]).await));
    seen.push((decision, get(&shared, "/v1/decisions/x", "wrong", &[]).await));
    seen.push((decision, get(&limited, "/v1/decisions/x", ALPHA, &[]).await));

    let mut statuses: Vec<(&str, u16, String)> = Vec::new();
    for (path, answer) in &seen {
        let method = if *path == decision { "get" } else { "post" };
        let path = if *path == hooks { hooks } else { path };
        let status = answer.status.as_str().to_owned();
        let mut listed = document["paths"][path][method]["responses"][&status].clone();
        if let Some(reference) = listed["$ref"].as_str() {
            listed = document["components"]["responses"][reference.rsplit('/').next().unwrap()].clone();
        }
        assert!(listed.is_object(), "{method} {path} sends {status}, which the document does not list");
        if answer.status.is_client_error() || answer.status.is_server_error() {
            let code = answer.code();
            assert!(answer.json["error"]["message"].is_string(), "{method} {path} {status}: {}", answer.json);
            let description = listed["description"].as_str().unwrap();
            assert!(
                description.contains(&format!("`{code}`")),
                "{method} {path} {status}: `{code}` is not in {description}"
            );
            statuses.push((path, answer.status.as_u16(), code.to_owned()));
        } else {
            statuses.push((path, answer.status.as_u16(), String::new()));
        }
    }
    // Every code the routes can send was seen (so this test covers each).
    let codes: std::collections::BTreeSet<&str> = statuses.iter().map(|(_, _, c)| c.as_str()).collect();
    for code in [
        "unauthorized",
        "invalid_json",
        "unsupported_media_type",
        "invalid_idempotency_key",
        "policy_forbidden",
        "inline_forbidden",
        "already_pending",
        "body_too_large",
        "invalid_field",
        "idempotency_mismatch",
        "callback_forbidden",
        "callback_unresolved",
        "callbacks_disabled",
        "unknown_policy",
        "fleet_unavailable",
        "rate_limited",
        "too_many_pending",
        "too_many_pending_bytes",
        "not_found",
    ] {
        assert!(codes.contains(code), "{code} was not sent: {statuses:?}");
    }
}

// === Claude Code's hooks ===

fn hook(event: &str, tool_use_id: &str) -> Value {
    json!({
        "session_id": "sess-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/work",
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": tool_use_id,
        "tool_response": {"stdout": "a", "stderr": ""},
    })
}

fn hook_path(query: &str) -> String {
    format!("{CLAUDE_CODE_HOOKS}?{query}")
}

#[tokio::test]
async fn a_pre_tool_use_hook_gets_the_fleet_s_decision_in_the_hook_s_own_shape() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let allowed = post(&shared, &hook_path("policy=a"), ALPHA, &hook("PreToolUse", "toolu_1"), &[]).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(
        allowed.json,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}})
    );
    let denied = post(&shared, &hook_path("policy=a"), ALPHA, &hook("PreToolUse", "reject"), &[]).await;
    assert_eq!(denied.json["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(denied.json["hookSpecificOutput"]["permissionDecisionReason"], "No.");
    let sent = fleet.sent.lock().unwrap()[0].clone();
    let key = sent.key.unwrap();
    assert_eq!((key.run_id.as_str(), key.sample_id.as_str(), key.tool_call_id.as_str()), ("sess-1", "main", "toolu_1"));
    assert_eq!(key.tenant, "alpha");
    let Some(v1::request::Body::Approval(approval)) = sent.body else { panic!("an approval") };
    assert_eq!(approval.call.unwrap().function, "Bash");
}

#[tokio::test]
async fn a_post_tool_use_hook_is_a_review_that_continues_or_blocks_with_the_reason() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let path = hook_path("policy=a");
    assert_eq!(post(&shared, &path, ALPHA, &hook("PostToolUse", "toolu_1"), &[]).await.json, json!({}));
    let blocked = post(&shared, &path, ALPHA, &hook("PostToolUse", "reject"), &[]).await;
    assert_eq!(blocked.json, json!({"decision": "block", "reason": "No."}));
    let sent = fleet.sent.lock().unwrap()[0].clone();
    let Some(v1::request::Body::Review(review)) = sent.body else { panic!("a review") };
    assert_eq!(serde_json::from_str::<Value>(&review.output).unwrap()["stdout"], "a");
}

#[tokio::test]
async fn a_hook_needs_a_token_that_may_use_its_policy_and_then_reaches_the_fleet() {
    let fleet = FakeFleet::new(true);
    let shared = shared(fleet.clone(), limits());
    let call_hook = |token: &'static str, query: &'static str| {
        let shared = shared.clone();
        async move { post(&shared, &hook_path(query), token, &hook("PreToolUse", "toolu_1"), &[]).await }
    };
    assert_eq!(call_hook("wrong", "policy=a").await.status, StatusCode::UNAUTHORIZED);
    let forbidden = call_hook(ALPHA, "policy=b").await;
    assert_eq!((forbidden.status, forbidden.code()), (StatusCode::FORBIDDEN, "policy_forbidden"));
    for query in ["", "policy=a&timeout=0", "policy=a&escalated=maybe", "policy=a&other=1"] {
        let refused = post(&shared, &hook_path(query), ALPHA, &hook("PreToolUse", "toolu_1"), &[]).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"), "{query}");
    }
    assert_eq!(fleet.sent(), 0);
    assert_eq!(call_hook(BETA, "policy=b").await.status, StatusCode::OK);
    assert_eq!(fleet.sent(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_hook_without_a_decision_within_its_timeout_is_denied() {
    let fleet = FakeFleet::new(false);
    let shared = shared(fleet.clone(), limits());
    let denied = post(&shared, &hook_path("policy=a&timeout=2"), ALPHA, &hook("PreToolUse", "toolu_1"), &[]).await;
    assert_eq!(denied.status, StatusCode::OK);
    assert_eq!(denied.json["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = denied.json["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
    assert_eq!(reason, "Airlock had no decision on this call within 2 s");
    let blocked = post(&shared, &hook_path("policy=a&timeout=2"), ALPHA, &hook("PostToolUse", "toolu_1"), &[]).await;
    assert_eq!(blocked.json["decision"], "block");
    assert_eq!(fleet.sent(), 2);
}

#[tokio::test]
async fn a_hook_the_fleet_could_not_decide_is_denied_with_why() {
    let shared = shared(FakeFleet::new(true), limits());
    for (id, code) in [("refuse", "unknown_policy"), ("down", "fleet_unavailable")] {
        let denied = post(&shared, &hook_path("policy=a"), ALPHA, &hook("PreToolUse", id), &[]).await;
        assert_eq!(denied.status, StatusCode::OK);
        assert_eq!(denied.json["hookSpecificOutput"]["permissionDecision"], "deny");
        let reason = denied.json["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
        assert!(reason.contains(code), "{reason}");
    }
}
