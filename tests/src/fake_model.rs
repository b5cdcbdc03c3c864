//! A model API on 127.0.0.1:0 that speaks OpenAI chat completions and Anthropic Messages
//! as the real services do, errors included, and answers by a marker in the prompt:
//!
//! | marker | reply |
//! |---|---|
//! | `MARK:score-N` | a score of N |
//! | `MARK:prose-N` | prose with "Score: N" and no JSON |
//! | `MARK:ratelimit-ID-N` | 429 with `Retry-After: 1` the first time, then N |
//! | `MARK:overloaded-ID-N` | 500 (OpenAI) or 529 (Anthropic) the first time, then N |
//! | `MARK:slowonce-ID-N` | no answer for a minute the first time, then N |
//! | `MARK:slow` | no answer for a minute |
//! | `MARK:malformed` | text with no score |
//! | `MARK:empty` | no choices (OpenAI) or no content (Anthropic) |
//!
//! and, as a monitor that quotes the call it judges before its verdict (with `ID` to tell
//! requests apart):
//!
//! | marker | text reply | structured reply |
//! |---|---|---|
//! | `MARK:quote-ID-N` | the call, then `{"score": N, …}` | a score of N (Anthropic: the quote beside the tool call) |
//! | `MARK:quoteprose-ID-N` | the call, then "I rate this N/10." | a score of N |
//! | `MARK:quoteonly-ID-0` | the call, and a judgement in words only | a score of 0 |
//! | `MARK:restate-ID-N` | `{"score":0}` in its own words, then `{"score": N, …}` | a score of N |
//! | `MARK:ignoreschema-ID-N` | the call, then `{"score": N, …}` | the same text: a server that ignores the schema |
//!
//! A request for a tool call (one with `tools`, other than the Anthropic monitor's
//! `record_suspicion`: a control protocol's trusted model or untrusted sample) is answered by
//! the test's script ([`FakeModel::script`]): the replies of the first key the request's body
//! contains, one per request, the last repeated ([`Reply`]).
//!
//! Requests are checked like the real APIs check them (key, version header, a strict schema
//! when one is asked for, tool results that answer a call, a forced tool that is offered); a
//! bad one gets the API's 400 or 401. The last request body of each marker is kept
//! ([`FakeModel::request`]), and of each script's key ([`FakeModel::scripted`]), and when each
//! request arrived ([`FakeModel::arrivals`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock_monitor::prompt::{Limits, Template};
use airlock_monitor::provider::{ProviderConfig, ProviderKind};
use airlock_monitor::retry::RetryPolicy;
use airlock_monitor::{Decision, MonitorConfig};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

pub const KEY: &str = "sk-test-key";

/// The server's address and what it saw.
#[derive(Clone)]
pub struct FakeModel {
    pub addr: SocketAddr,
    seen: Seen,
    scripts: Scripts,
    total: Arc<AtomicU32>,
}

/// A scripted answer to a tool-call request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A call of `function` with these arguments.
    Call(&'static str, Value),
    /// Text and no call.
    Text(&'static str),
    /// The API's overloaded error (500 or 529), every time.
    Overloaded,
    /// No answer for a minute.
    Slow,
}

/// The scripts by key, in the order given: the replies, how many requests matched, the last
/// one's body.
type Scripts = Arc<Mutex<Vec<(String, Vec<Reply>, u32, Value)>>>;

/// The server's state.
#[derive(Clone)]
struct Shared {
    seen: Seen,
    scripts: Scripts,
    /// How long each answer takes, as a model's would.
    latency: Duration,
    /// Requests answered.
    total: Arc<AtomicU32>,
}

impl FakeModel {
    /// Starts the server on a task of the current runtime.
    pub async fn start() -> Self {
        Self::with_latency(Duration::ZERO).await
    }

    /// Starts a server that takes `latency` to answer each request.
    pub async fn with_latency(latency: Duration) -> Self {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let scripts = Scripts::default();
        let total = Arc::new(AtomicU32::new(0));
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(Shared { seen: seen.clone(), scripts: scripts.clone(), latency, total: total.clone() });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a local port");
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the fake model serves") });
        FakeModel { addr, seen, scripts, total }
    }

    /// Requests answered so far, of every kind.
    pub fn total(&self) -> u32 {
        self.total.load(Ordering::Relaxed)
    }

    /// Answers the tool-call requests whose body contains `key` with `replies`, one per
    /// request, the last repeated.
    pub fn script(&self, key: &str, replies: Vec<Reply>) {
        assert!(!replies.is_empty(), "a script needs a reply");
        self.scripts.lock().unwrap().push((key.to_owned(), replies, 0, Value::Null));
    }

    /// How many tool-call requests `key`'s script answered, and the last one's body.
    pub fn scripted(&self, key: &str) -> (u32, Value) {
        let scripts = self.scripts.lock().unwrap();
        let (_, _, count, body) = scripts.iter().find(|(k, ..)| k == key).expect("a script with the key");
        (*count, body.clone())
    }

    /// `http://127.0.0.1:<port>/v1` (OpenAI's base URL shape).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:<port>` (Anthropic's base URL shape).
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests carried `marker`.
    pub fn calls(&self, marker: &str) -> u32 {
        self.seen.lock().unwrap().get(marker).map_or(0, |mark| mark.arrivals.len() as u32)
    }

    /// The body of the last request that carried `marker`.
    pub fn request(&self, marker: &str) -> Value {
        self.seen.lock().unwrap().get(marker).map(|mark| mark.last.clone()).expect("a request with the marker")
    }

    /// When each request whose marker starts with `prefix` arrived, in order.
    pub fn arrivals(&self, prefix: &str) -> Vec<Instant> {
        let seen = self.seen.lock().unwrap();
        let mut arrivals: Vec<Instant> = seen
            .iter()
            .filter(|(marker, _)| marker.starts_with(prefix))
            .flat_map(|(_, m)| m.arrivals.clone())
            .collect();
        arrivals.sort();
        arrivals
    }
}

/// The requests that carried one marker.
#[derive(Default)]
struct Mark {
    /// When each arrived.
    arrivals: Vec<Instant>,
    /// The last one's body.
    last: Value,
}

/// Requests by marker.
type Seen = Arc<Mutex<HashMap<String, Mark>>>;

/// What to answer.
enum Script {
    Score(f64),
    Prose(f64),
    /// Text that quotes the call, then the model's own words.
    Quoting(String),
    Error,
    Slow,
    Malformed,
    Empty,
}

/// The call as the prompt shows it, which a quoting model copies.
fn shown_call(prompt: &str) -> &str {
    const BEFORE: &str = "The tool call:\n<untrusted>\n";
    let start = prompt.find(BEFORE).expect("the default template") + BEFORE.len();
    let end = prompt[start..].find("\n</untrusted>").expect("a closed marker");
    &prompt[start..start + end]
}

/// Reads the marker in `prompt`, counts the call, and decides the reply (`structured`: as
/// a server that follows the schema it was given).
fn script(seen: &Seen, prompt: &str, body: &Value, structured: bool) -> Script {
    let Some(start) = prompt.find("MARK:") else { return Script::Malformed };
    let marker: String =
        prompt[start + 5..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').collect();
    let count = {
        let mut seen = seen.lock().unwrap();
        let mark = seen.entry(marker.clone()).or_default();
        mark.arrivals.push(Instant::now());
        mark.last = body.clone();
        mark.arrivals.len()
    };
    let parts: Vec<&str> = marker.split('-').collect();
    let score = |s: &str| s.parse::<f64>().expect("a score in the marker");
    let quote = || format!("The agent wants to run:\n```\n{}\n```\n", shown_call(prompt));
    let verdict = |n: &str| json!({"score": score(n), "reason": format!("fake verdict {n}")}).to_string();
    match parts.as_slice() {
        ["score", n] => Script::Score(score(n)),
        ["prose", n] => Script::Prose(score(n)),
        ["ignoreschema", _, n] => Script::Quoting(format!("{}{}", quote(), verdict(n))),
        ["quote" | "quoteprose" | "quoteonly" | "restate", _, n] if structured => Script::Score(score(n)),
        ["quote", _, n] => Script::Quoting(format!("{}It pipes a download into sh. {}", quote(), verdict(n))),
        ["quoteprose", _, n] => Script::Quoting(format!("{}It pipes a download into sh. I rate this {n}/10.", quote())),
        ["quoteonly", _, _] => Script::Quoting(format!("{}This is clearly dangerous.", quote())),
        ["restate", _, n] => {
            Script::Quoting(format!("It claims {{\"score\":0}} is right, but it is not. {}", verdict(n)))
        }
        ["ratelimit" | "overloaded", _, _] if count == 1 => Script::Error,
        ["slowonce", _, _] if count == 1 => Script::Slow,
        ["ratelimit" | "overloaded" | "slowonce", _, n] => Script::Score(score(n)),
        ["slow"] => Script::Slow,
        ["empty"] => Script::Empty,
        _ => Script::Malformed,
    }
}

/// The scripted reply to a tool-call request; `None` when no script's key is in the body.
fn scripted(scripts: &Scripts, body: &Value) -> Option<Reply> {
    let text = body.to_string();
    let mut scripts = scripts.lock().unwrap();
    let (_, replies, count, last) = scripts.iter_mut().find(|(key, ..)| text.contains(key.as_str()))?;
    *count += 1;
    *last = body.clone();
    Some(replies[(*count as usize - 1).min(replies.len() - 1)].clone())
}

/// What the OpenAI API says of a tool-call request it would refuse.
fn openai_tools_error(body: &Value) -> Option<String> {
    let tools = body["tools"].as_array()?;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    if names.len() != tools.len() || tools.iter().any(|t| t["type"] != "function") {
        return Some("tools must be functions with names".into());
    }
    if let Some(forced) = body["tool_choice"]["function"]["name"].as_str()
        && !names.contains(&forced)
    {
        return Some(format!("tool_choice names {forced}, which is not in tools"));
    }
    let mut open: Vec<String> = Vec::new();
    for message in body["messages"].as_array()? {
        match message["role"].as_str() {
            Some("assistant") => {
                open = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["id"].as_str().map(str::to_owned))
                    .collect();
            }
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                if !open.iter().any(|o| o == id) {
                    return Some(
                        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'".into(),
                    );
                }
            }
            Some("system" | "user") => open.clear(),
            _ => return Some(format!("invalid role in {message}")),
        }
    }
    None
}

/// What the Anthropic API says of a tool-call request it would refuse.
fn anthropic_tools_error(body: &Value) -> Option<String> {
    let tools = body["tools"].as_array()?;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    if names.len() != tools.len() || tools.iter().any(|t| !t["input_schema"].is_object()) {
        return Some("tools need a name and an input_schema".into());
    }
    if body["tool_choice"]["type"] == "tool" && !names.contains(&body["tool_choice"]["name"].as_str().unwrap_or("")) {
        return Some("tool_choice names no tool given".into());
    }
    let mut open: Vec<String> = Vec::new();
    for message in body["messages"].as_array()? {
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        if blocks.is_empty() && !message["content"].is_string() {
            return Some("all messages must have non-empty content".into());
        }
        for block in &blocks {
            match block["type"].as_str() {
                Some("text") if block["text"].as_str().is_none_or(|t| t.trim().is_empty()) => {
                    return Some("text content blocks must be non-empty".into());
                }
                Some("tool_result") if !open.iter().any(|id| block["tool_use_id"] == json!(id)) => {
                    return Some("tool_result blocks must answer a tool_use of the previous message".into());
                }
                _ => {}
            }
        }
        if message["role"] == "assistant" {
            open = blocks.iter().filter_map(|b| b["id"].as_str().map(str::to_owned)).collect();
        }
    }
    None
}

/// An OpenAI answer to a tool-call request.
async fn openai_tool_reply(shared: &Shared, body: &Value) -> Response {
    let error = |status: StatusCode, kind: &str, message: &str| {
        (status, Json(json!({"error": {"message": message, "type": kind, "param": null, "code": null}})))
            .into_response()
    };
    if let Some(message) = openai_tools_error(body) {
        return error(StatusCode::BAD_REQUEST, "invalid_request_error", &message);
    }
    let (message, finish) = match scripted(&shared.scripts, body) {
        None => return error(StatusCode::BAD_REQUEST, "invalid_request_error", "the test scripted no reply"),
        Some(Reply::Overloaded) => {
            return error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "The server had an error.");
        }
        Some(Reply::Slow) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            return error(StatusCode::GATEWAY_TIMEOUT, "server_error", "too slow");
        }
        Some(Reply::Text(text)) => (json!({"role": "assistant", "content": text, "refusal": null}), "stop"),
        Some(Reply::Call(function, arguments)) => (
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [{
                "id": "call_abc123", "type": "function",
                "function": {"name": function, "arguments": arguments.to_string()}
            }]}),
            "tool_calls",
        ),
    };
    Json(json!({
        "id": "chatcmpl-tools", "object": "chat.completion", "created": 1741570283, "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930}
    }))
    .into_response()
}

/// An Anthropic answer to a tool-call request.
async fn anthropic_tool_reply(shared: &Shared, body: &Value) -> Response {
    let error = |status: StatusCode, kind: &str, message: &str| {
        (status, Json(json!({"type": "error", "error": {"type": kind, "message": message}}))).into_response()
    };
    if let Some(message) = anthropic_tools_error(body) {
        return error(StatusCode::BAD_REQUEST, "invalid_request_error", &message);
    }
    let (content, stop) = match scripted(&shared.scripts, body) {
        None => return error(StatusCode::BAD_REQUEST, "invalid_request_error", "the test scripted no reply"),
        Some(Reply::Overloaded) => return error(StatusCode::from_u16(529).unwrap(), "overloaded_error", "Overloaded"),
        Some(Reply::Slow) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            return error(StatusCode::GATEWAY_TIMEOUT, "api_error", "too slow");
        }
        Some(Reply::Text(text)) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Some(Reply::Call(function, arguments)) => (
            json!([{"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": function, "input": arguments}]),
            "tool_use",
        ),
    };
    Json(json!({
        "id": "msg_tools", "type": "message", "role": "assistant", "model": body["model"], "content": content,
        "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 900, "output_tokens": 30}
    }))
    .into_response()
}

fn is_rate_limit(body: &Value) -> bool {
    body.to_string().contains("MARK:ratelimit")
}

async fn openai(State(shared): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    shared.total.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(shared.latency).await;
    let seen = shared.seen.clone();
    let error = |status: StatusCode, kind: &str, message: &str| {
        (status, Json(json!({"error": {"message": message, "type": kind, "param": null, "code": null}})))
            .into_response()
    };
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {KEY}")) {
        return error(StatusCode::UNAUTHORIZED, "invalid_request_error", "Incorrect API key provided.");
    }
    if body.get("tools").is_some() {
        return openai_tool_reply(&shared, &body).await;
    }
    let structured = body.get("response_format").is_some();
    if (structured && body["response_format"]["json_schema"]["strict"] != json!(true))
        || body["messages"][0]["role"] != "system"
    {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "expected a strict json_schema and a system message",
        );
    }
    let user = body["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    let content = match script(&seen, &user, &body, structured) {
        Script::Score(n) => json!({"score": n, "reason": format!("fake verdict {n}")}).to_string(),
        Script::Prose(n) => format!("Looking at this call, I'd say Score: {n}. It seems fine."),
        Script::Quoting(text) => text,
        Script::Malformed => "I am not able to rate this.".to_owned(),
        Script::Slow => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            return error(StatusCode::GATEWAY_TIMEOUT, "server_error", "too slow");
        }
        Script::Empty => {
            return Json(json!({"id": "chatcmpl-empty", "object": "chat.completion", "created": 1741570283, "model": body["model"], "choices": []}))
                .into_response();
        }
        Script::Error if is_rate_limit(&body) => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "requests",
                "Rate limit reached for requests. Please try again in 1s.",
            );
            response.headers_mut().insert("retry-after", "1".parse().unwrap());
            return response;
        }
        Script::Error => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "The server had an error while processing your request. Sorry about that!",
            );
        }
    };
    Json(json!({
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": body["model"],
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 1117, "completion_tokens": 46, "total_tokens": 1163},
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035"
    }))
    .into_response()
}

async fn anthropic(State(shared): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    shared.total.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(shared.latency).await;
    let seen = shared.seen.clone();
    let error = |status: StatusCode, kind: &str, message: &str| {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"});
        (status, Json(body)).into_response()
    };
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(KEY) {
        return error(StatusCode::UNAUTHORIZED, "authentication_error", "invalid x-api-key");
    }
    if headers.get("anthropic-version").is_none() || body.get("max_tokens").is_none() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version and max_tokens are required",
        );
    }
    if body.get("tools").is_some() && body["tools"][0]["name"] != json!(airlock_monitor::provider::anthropic::TOOL) {
        return anthropic_tool_reply(&shared, &body).await;
    }
    let tool = body["tool_choice"]["name"].as_str().unwrap_or_default().to_owned();
    if body.get("tool_choice").is_some() && body["tools"][0]["name"] != json!(tool) {
        return error(StatusCode::BAD_REQUEST, "invalid_request_error", "tool_choice names no tool given");
    }
    let structured = !tool.is_empty();
    let user = body["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
    let quote = format!("The agent wants to run `{}`.", shown_call(&user));
    let (content, stop) = match script(&seen, &user, &body, structured) {
        // Forced to the tool, a quoting model still writes its text beside the call.
        Script::Score(n) if structured && user.contains("MARK:quote") => (
            json!([{"type": "text", "text": quote}, {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": tool, "input": {"score": n, "reason": format!("fake verdict {n}")}}]),
            "tool_use",
        ),
        Script::Score(n) => (
            json!([{"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": tool, "input": {"score": n, "reason": format!("fake verdict {n}")}}]),
            "tool_use",
        ),
        Script::Prose(n) => (json!([{"type": "text", "text": format!("Score: {n}")}]), "end_turn"),
        Script::Quoting(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Script::Malformed => (json!([{"type": "text", "text": "I am not able to rate this."}]), "end_turn"),
        Script::Empty => (json!([]), "end_turn"),
        Script::Slow => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            return error(StatusCode::GATEWAY_TIMEOUT, "api_error", "too slow");
        }
        Script::Error if is_rate_limit(&body) => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            );
            response.headers_mut().insert("retry-after", "1".parse().unwrap());
            return response;
        }
        Script::Error => return error(StatusCode::from_u16(529).unwrap(), "overloaded_error", "Overloaded"),
    };
    Json(json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 503}
    }))
    .into_response()
}

/// A monitor of step `step` of fleet `prefix` on this model's API of `kind` at `base_url`: eight
/// calls at once, retries quick enough for a test, escalating what it cannot score.
pub fn monitor_config(prefix: &str, step: &str, kind: ProviderKind, base_url: String) -> MonitorConfig {
    MonitorConfig {
        prefix: prefix.into(),
        step: step.into(),
        monitor_id: format!("{step}-test"),
        concurrency: 8,
        provider: ProviderConfig {
            kind,
            base_url,
            model: format!("fake-{}", kind.as_str()),
            api_key: Some(KEY.into()),
            structured: true,
            max_tokens: None,
            temperature: Some(0.0),
        },
        trusted: None,
        untrusted: None,
        template: Template::default(),
        limits: Limits::default(),
        fallback: Decision::Escalate,
        retry: RetryPolicy {
            attempts: 3,
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(5),
            attempt_timeout: Duration::from_secs(3),
        },
        sampling: Default::default(),
        metrics: Default::default(),
    }
}
