//! A stand-in for Slack in the tests: a Web API server that speaks its wire format
//! (`chat.postMessage` and `chat.update` answering `{"ok": true, "channel", "ts"}`, a call
//! without the bot token answering `{"ok": false, "error": "not_authed"}`, the first calls
//! rate-limited if asked), a `response_url`
//! that keeps what the app tells a person, and button presses as Slack posts them, signed the
//! way Slack signs requests with an HMAC of the tests' own (checked against Slack's own SDK in
//! `reviewer_slack`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use axum::Json;
use axum::http::HeaderMap;
use axum::routing::post;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::webhooks::serve;

/// One call the fake Web API received.
#[derive(Debug, Clone)]
pub struct ApiCall {
    /// The method (`chat.postMessage`, `chat.update`).
    pub method: String,
    /// The `Authorization` header.
    pub authorization: String,
    /// The JSON arguments.
    pub arguments: Value,
}

/// A running fake Slack: what its Web API received and what its `response_url` was told.
pub struct FakeSlack {
    /// `http://…/api`, the app's `api_url`.
    pub api_url: String,
    /// Where presses say to respond (`http://…/respond`).
    pub response_url: String,
    /// Each Web API call, in order.
    pub calls: mpsc::UnboundedReceiver<ApiCall>,
    /// Each message posted to the `response_url`.
    pub responses: mpsc::UnboundedReceiver<Value>,
}

/// Starts a fake Slack whose Web API takes `bot_token`, and answers its first `limited` calls
/// `{"ok": false, "error": "ratelimited"}`.
pub async fn fake_slack(bot_token: &str, limited: u32) -> FakeSlack {
    let (calls_sender, calls) = mpsc::unbounded_channel();
    let (responses_sender, responses) = mpsc::unbounded_channel();
    let next_ts = Arc::new(AtomicU64::new(1));
    let limited = Arc::new(AtomicU32::new(limited));
    let expected = format!("Bearer {bot_token}");
    let api = post(
        move |axum::extract::Path(method): axum::extract::Path<String>,
              headers: HeaderMap,
              Json(arguments): Json<Value>| {
            let (calls, next_ts, expected, limited) =
                (calls_sender.clone(), next_ts.clone(), expected.clone(), limited.clone());
            async move {
                let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
                let call = ApiCall { method: method.clone(), authorization: authorization.to_owned(), arguments };
                let _ = calls.send(call.clone());
                if authorization != expected {
                    return Json(json!({"ok": false, "error": "not_authed"}));
                }
                if limited.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
                    return Json(json!({"ok": false, "error": "ratelimited"}));
                }
                let channel = call.arguments["channel"].clone();
                let ts = match method.as_str() {
                    "chat.update" => call.arguments["ts"].clone(),
                    _ => json!(format!("1700000000.{:06}", next_ts.fetch_add(1, Ordering::Relaxed))),
                };
                Json(json!({"ok": true, "channel": channel, "ts": ts, "message": {"text": call.arguments["text"]}}))
            }
        },
    );
    let respond = post(move |Json(message): Json<Value>| {
        let responses = responses_sender.clone();
        async move {
            let _ = responses.send(message);
            "ok"
        }
    });
    let router = axum::Router::new().route("/api/{method}", api).route("/respond", respond);
    let base = format!("http://{}", serve(router, ([127, 0, 0, 1], 0).into()).await);
    FakeSlack { api_url: format!("{base}/api"), response_url: format!("{base}/respond"), calls, responses }
}

/// `v0=<hex>`: the HMAC-SHA256 of `v0:{timestamp}:{body}` under `secret`, as Slack signs.
pub fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("v0={hex}")
}

/// The form body Slack posts when `user` presses the button `action_id` (whose value is
/// `value`) of the message `ts` in `channel`, to be answered at `response_url`.
pub fn press(user: &str, action_id: &str, value: &str, channel: &str, ts: &str, response_url: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "username": user.to_lowercase(), "team_id": "T1"},
        "api_app_id": "A1",
        "team": {"id": "T1", "domain": "example"},
        "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
        "channel": {"id": channel, "name": "review"},
        "message": {"type": "message", "ts": ts, "text": "A call waits for a person"},
        "trigger_id": "1.2.3",
        "response_url": response_url,
        "actions": [{
            "type": "button",
            "action_id": action_id,
            "block_id": "b1",
            "text": {"type": "plain_text", "text": action_id},
            "value": value,
            "action_ts": format!("{}.000100", airlock_webhook::unix_seconds()),
        }],
    });
    serde_urlencoded::to_string([("payload", payload.to_string())]).unwrap()
}
