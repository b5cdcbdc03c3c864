//! The server side over streamable HTTP (MCP 2025-06-18 and 2025-11-25): the proxy is the
//! server's HTTP client.
//!
//! Each message goes out as a POST to the server's one endpoint, accepting JSON or an SSE
//! stream back; every message that comes back, on a POST's response or on the GET stream the
//! proxy opens once the session is initialised, goes to the session. The `Mcp-Session-Id`
//! the server gives at initialisation and the negotiated `MCP-Protocol-Version` go with every
//! later request; the session is deleted when the proxy's session ends.
//!
//! Notifications and responses are posted in order, each once the previous one's response
//! head came (`notifications/initialized` before the next request); requests are posted
//! without waiting, so a call held by a slow tool holds no other.

use std::sync::{Arc, Mutex, PoisonError};

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::message::{self, Id, Message, Response};
use crate::session::Link;
use crate::sse::Events;
use crate::stdio::BUFFER;

/// The header naming a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The header naming the negotiated protocol version.
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// The JSON-RPC error code of a request the server could not be asked (JSON-RPC's internal
/// error).
const UNREACHABLE: i64 = -32603;

/// The method that ends initialisation, after which the GET stream is opened.
const INITIALIZED: &str = "notifications/initialized";

/// Why the server URL cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("cannot make the HTTP client for the MCP server: {0}")]
pub struct ClientError(String);

struct Upstream {
    http: reqwest::Client,
    url: Url,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
}

/// The session's link to the server at `url`, and the task that posts (done once the session
/// dropped the link and the server's session was deleted).
pub fn connect(url: Url) -> Result<(Link, JoinHandle<()>), ClientError> {
    let http = airlock_webhook::http_client().map_err(|e| ClientError(e.to_string()))?;
    let upstream = Arc::new(Upstream { http, url, session: Mutex::new(None), version: Mutex::new(None) });
    let (to_session, from_server) = mpsc::channel(BUFFER);
    let (to_server, outgoing) = mpsc::channel(BUFFER);
    let posting = tokio::spawn(post_all(upstream, outgoing, to_session));
    Ok((Link { tx: to_server, rx: from_server }, posting))
}

async fn post_all(upstream: Arc<Upstream>, mut outgoing: mpsc::Receiver<Message>, to_session: mpsc::Sender<Message>) {
    while let Some(message) = outgoing.recv().await {
        let body = message.to_json();
        match message {
            Message::Request(request) => {
                let (upstream, to_session) = (upstream.clone(), to_session.clone());
                tokio::spawn(async move {
                    let outcome = upstream.send(Method::POST, Some(body)).await;
                    upstream.read(outcome, Some(&request.id), &to_session).await;
                });
            }
            Message::Notification(notification) => {
                let outcome = upstream.send(Method::POST, Some(body)).await;
                let initialized = notification.method == INITIALIZED && outcome.is_ok();
                upstream.read_in_background(outcome, &to_session);
                if initialized {
                    let (upstream, to_session) = (upstream.clone(), to_session.clone());
                    tokio::spawn(async move {
                        let outcome = upstream.send(Method::GET, None).await;
                        upstream.read(outcome, None, &to_session).await;
                    });
                }
            }
            Message::Response(_) => {
                let outcome = upstream.send(Method::POST, Some(body)).await;
                upstream.read_in_background(outcome, &to_session);
            }
        }
    }
    if upstream.session().is_some() {
        let _ = upstream.send(Method::DELETE, None).await;
    }
}

impl Upstream {
    fn session(&self) -> Option<String> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    async fn send(&self, method: Method, body: Option<String>) -> Result<reqwest::Response, reqwest::Error> {
        let accept = if method == Method::GET { "text/event-stream" } else { "application/json, text/event-stream" };
        let mut request = self.http.request(method, self.url.clone()).header(ACCEPT, accept);
        if let Some(session) = self.session() {
            request = request.header(SESSION_HEADER, session);
        }
        if let Some(version) = self.version.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            request = request.header(VERSION_HEADER, version);
        }
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        request.send().await
    }

    fn read_in_background(
        self: &Arc<Self>,
        outcome: Result<reqwest::Response, reqwest::Error>,
        to_session: &mpsc::Sender<Message>,
    ) {
        let (upstream, to_session) = (self.clone(), to_session.clone());
        tokio::spawn(async move { upstream.read(outcome, None, &to_session).await });
    }

    /// Passes every message of a response to the session; a request (`id`) that got no
    /// answer is answered with an error, so its client does not wait for ever.
    async fn read(
        &self,
        outcome: Result<reqwest::Response, reqwest::Error>,
        id: Option<&Id>,
        to_session: &mpsc::Sender<Message>,
    ) {
        let fail = |why: String| async move {
            match id {
                Some(id) => {
                    let error =
                        Response::error(id.clone(), UNREACHABLE, format!("the MCP server at {}: {why}", self.url));
                    let _ = to_session.send(Message::Response(error)).await;
                }
                None => debug!(%why, "Nothing more from the MCP server on this stream."),
            }
        };
        let mut response = match outcome {
            Ok(response) => response,
            Err(e) => return fail(e.to_string()).await,
        };
        if let Some(session) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            self.session.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(|| session.to_owned());
        }
        match response.status() {
            StatusCode::ACCEPTED => return,
            status if !status.is_success() => return fail(format!("HTTP {status}")).await,
            _ => {}
        }
        let sse = response.headers().get(CONTENT_TYPE).is_some_and(is_event_stream);
        let mut events = Events::default();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if sse => {
                    for data in events.push(&chunk) {
                        self.pass(data.as_bytes(), to_session).await;
                    }
                }
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return warn!(error = %e, "The MCP server's response broke off."),
            }
        }
        if !sse && !body.is_empty() {
            self.pass(&body, to_session).await;
        }
    }

    async fn pass(&self, bytes: &[u8], to_session: &mpsc::Sender<Message>) {
        let messages = match message::decode(bytes) {
            Ok(messages) => messages,
            Err(e) => return warn!(error = %e, "Skipped what the MCP server sent."),
        };
        for message in messages {
            if let Message::Response(Response { outcome: Ok(result), .. }) = &message
                && let Some(version) = result.get("protocolVersion").and_then(Value::as_str)
                && result.get("serverInfo").is_some()
            {
                *self.version.lock().unwrap_or_else(PoisonError::into_inner) = Some(version.to_owned());
            }
            let _ = to_session.send(message).await;
        }
    }
}

fn is_event_stream(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"))
}
