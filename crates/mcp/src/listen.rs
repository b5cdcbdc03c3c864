//! The client side over streamable HTTP (MCP 2025-06-18 and 2025-11-25): the proxy is the
//! clients' MCP server, on one endpoint.
//!
//! - `POST` carries client messages. An `initialize` request opens a session: a server of its
//!   own (the command started anew, or a session of the server URL) and an `Mcp-Session-Id`
//!   the client sends with every later request (unknown: `404`, missing: `400`). A POST of
//!   notifications and responses only is answered `202`; one with requests, with an SSE
//!   stream that carries their responses, and the progress notifications of their progress
//!   tokens, and ends after the last response.
//! - `GET` opens the session's standing SSE stream for what the server sends unasked.
//!   Without one, such a message goes on an open POST stream, or waits for one.
//! - `DELETE` ends the session.
//!
//! A request with an `Origin` header that is not a loopback origin is refused (`403`), as the
//! transport's guard against DNS rebinding asks.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use airlock_transport::Transport;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::message::{self, Id, Message};
use crate::session::{self, Link};
use crate::stdio::BUFFER;
use crate::upstream::SESSION_HEADER;
use crate::{Proxy, sse, tools};

/// Messages a session keeps for a standing stream that is not open yet, at most.
const BACKLOG: usize = 256;

/// The proxy's HTTP endpoint, at `path`.
pub fn app<T: Transport>(proxy: Arc<Proxy<T>>, path: &str) -> (Router, Sessions) {
    let sessions = Sessions::default();
    let state = Listener { proxy, sessions: sessions.clone() };
    let router = Router::new()
        .route(path, post(on_post::<T>).get(on_get::<T>).delete(on_delete::<T>))
        .with_state(Arc::new(state));
    (router, sessions)
}

struct Listener<T: Transport> {
    proxy: Arc<Proxy<T>>,
    sessions: Sessions,
}

/// The sessions the endpoint holds.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<HashMap<String, Arc<Open>>>>);

/// One open session: where client messages go, and where the server's go.
struct Open {
    to_session: mpsc::Sender<Message>,
    /// Shared with the task that routes the session's messages, which must not hold the
    /// session open: the session ends when the last `to_session` goes.
    routes: Arc<Mutex<Routes>>,
}

/// Where each message for the client goes.
#[derive(Default)]
struct Routes {
    /// The POST stream of each request waiting for its response.
    requests: HashMap<Id, mpsc::Sender<Message>>,
    /// The request each progress token belongs to.
    tokens: HashMap<String, Id>,
    /// The GET stream, when one is open.
    standing: Option<mpsc::Sender<Message>>,
    /// What waits for a stream.
    backlog: Vec<Message>,
}

// === impl Sessions ===

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Open>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, id: &str) -> Option<Arc<Open>> {
        self.lock().get(id).cloned()
    }

    /// Ends every session (their clients are gone): for shutdown.
    pub fn close_all(&self) {
        self.lock().clear();
    }
}

// === handlers ===

async fn on_post<T: Transport>(State(listener): State<Arc<Listener<T>>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = foreign_origin(&headers) {
        return refused;
    }
    let messages = match message::decode(&body) {
        Ok(messages) => messages,
        Err(invalid) => return json_error(StatusCode::BAD_REQUEST, &invalid.response()),
    };
    let initialize = messages.iter().any(|m| matches!(m, Message::Request(r) if r.method == "initialize"));
    let (session_id, open) = if initialize {
        match listener.open().await {
            Ok(opened) => opened,
            Err(why) => return plain(StatusCode::BAD_GATEWAY, why),
        }
    } else {
        match session_of(&listener.sessions, &headers) {
            Ok(found) => found,
            Err((status, why)) => return plain(status, why),
        }
    };
    let (stream_tx, stream_rx) = mpsc::channel(BUFFER);
    let mut requests = 0;
    {
        let mut routes = open.routes();
        for message in &messages {
            let Message::Request(request) = message else { continue };
            requests += 1;
            routes.requests.insert(request.id.clone(), stream_tx.clone());
            let token = request.params.as_ref().and_then(|p| p.get("_meta")).and_then(|m| m.get("progressToken"));
            if let Some(token) = token {
                routes.tokens.insert(token.to_string(), request.id.clone());
            }
        }
        if requests > 0 {
            let backlog = std::mem::take(&mut routes.backlog);
            for message in backlog {
                let _ = stream_tx.try_send(message);
            }
        }
    }
    drop(stream_tx);
    for message in messages {
        if open.to_session.send(message).await.is_err() {
            return plain(StatusCode::NOT_FOUND, "the session has ended");
        }
    }
    if requests == 0 {
        return StatusCode::ACCEPTED.into_response();
    }
    let mut response = event_stream(stream_rx);
    if initialize {
        response
            .headers_mut()
            .insert(SESSION_HEADER, HeaderValue::from_str(&session_id).expect("a uuid is a header value"));
    }
    response
}

async fn on_get<T: Transport>(State(listener): State<Arc<Listener<T>>>, headers: HeaderMap) -> Response {
    if let Some(refused) = foreign_origin(&headers) {
        return refused;
    }
    let (_, open) = match session_of(&listener.sessions, &headers) {
        Ok(found) => found,
        Err((status, why)) => return plain(status, why),
    };
    let (tx, rx) = mpsc::channel(BUFFER.max(BACKLOG));
    {
        let mut routes = open.routes();
        for message in std::mem::take(&mut routes.backlog) {
            let _ = tx.try_send(message);
        }
        routes.standing = Some(tx);
    }
    event_stream(rx)
}

async fn on_delete<T: Transport>(State(listener): State<Arc<Listener<T>>>, headers: HeaderMap) -> Response {
    if let Some(refused) = foreign_origin(&headers) {
        return refused;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain(StatusCode::BAD_REQUEST, "no Mcp-Session-Id");
    };
    match listener.sessions.lock().remove(id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => plain(StatusCode::NOT_FOUND, "no such session"),
    }
}

// === impl Listener ===

impl<T: Transport> Listener<T> {
    /// Opens a session: its server, the session's task, and the task that routes what it
    /// sends the client.
    async fn open(&self) -> Result<(String, Arc<Open>), String> {
        let (server, closing) = self.proxy.server.connect().map_err(|e| e.to_string())?;
        let (to_session, from_client) = mpsc::channel(BUFFER);
        let (to_client, outgoing) = mpsc::channel(BUFFER);
        let open = Arc::new(Open { to_session, routes: Arc::default() });
        let id = uuid::Uuid::now_v7().simple().to_string();
        self.sessions.lock().insert(id.clone(), open.clone());
        let client = Link { tx: to_client, rx: from_client };
        tokio::spawn(route(open.routes.clone(), outgoing));
        let (proxy, sessions, session_id) = (self.proxy.clone(), self.sessions.clone(), id.clone());
        tokio::spawn(async move {
            let ended = session::run(proxy.gate.clone(), proxy.progress_every, client, server).await;
            sessions.lock().remove(&session_id);
            closing.close().await;
            match ended {
                Ok(()) => info!(session = %session_id, "The MCP client ended its session."),
                Err(e) => error!(session = %session_id, "{e}"),
            }
        });
        Ok((id, open))
    }
}

impl Open {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        lock(&self.routes)
    }
}

fn lock(routes: &Mutex<Routes>) -> MutexGuard<'_, Routes> {
    routes.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Routes what the session sends its client: a response to the POST stream of its request,
/// a progress notification to the POST stream of its token's request, anything else to the
/// standing stream, or an open POST stream, or the backlog. Ends (and with it every stream)
/// when the session does.
async fn route(routes: Arc<Mutex<Routes>>, mut outgoing: mpsc::Receiver<Message>) {
    while let Some(message) = outgoing.recv().await {
        let stream = lock(&routes).stream_for(&message);
        match stream {
            Some(stream) => {
                let _ = stream.send(message).await;
            }
            None => {
                let mut routes = lock(&routes);
                if routes.backlog.len() < BACKLOG {
                    routes.backlog.push(message);
                } else {
                    warn!("A message for the MCP client was dropped: no stream is open to carry it.");
                }
            }
        }
    }
    let mut routes = lock(&routes);
    routes.requests.clear();
    routes.standing = None;
}

impl Routes {
    fn stream_for(&mut self, message: &Message) -> Option<mpsc::Sender<Message>> {
        if let Some(id) = message.response_id() {
            let stream = self.requests.remove(id);
            self.tokens.retain(|_, request| request != id);
            return stream;
        }
        if let Message::Notification(notification) = message
            && notification.method == tools::PROGRESS
            && let Some(token) = notification.params.as_ref().and_then(|p| p.get("progressToken"))
            && let Some(stream) = self.tokens.get(&token.to_string()).and_then(|id| self.requests.get(id))
        {
            return Some(stream.clone());
        }
        self.standing.clone().filter(|s| !s.is_closed()).or_else(|| self.requests.values().next().cloned())
    }
}

// === helpers ===

/// The session a request names, or the status and words that refuse it.
fn session_of(sessions: &Sessions, headers: &HeaderMap) -> Result<(String, Arc<Open>), (StatusCode, &'static str)> {
    let id = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or((StatusCode::BAD_REQUEST, "no Mcp-Session-Id: initialize a session first"))?;
    let open = sessions.get(id).ok_or((StatusCode::NOT_FOUND, "no such session"))?;
    Ok((id.to_owned(), open))
}

/// `403` for an `Origin` that is not a loopback origin.
fn foreign_origin(headers: &HeaderMap) -> Option<Response> {
    let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or("");
    let host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    let host =
        host.rsplit_once(':').filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit())).map_or(host, |(h, _)| h);
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
    (!loopback).then(|| plain(StatusCode::FORBIDDEN, "requests from another origin are refused"))
}

fn event_stream(rx: mpsc::Receiver<Message>) -> Response {
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        let message = rx.recv().await?;
        Some((Ok::<_, Infallible>(Bytes::from(sse::event(&message.to_json()))), rx))
    });
    let mut response = Body::from_stream(events).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn json_error(status: StatusCode, message: &Message) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], message.to_json()).into_response()
}

fn plain(status: StatusCode, text: impl Into<String>) -> Response {
    (status, text.into()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_are_let_in() {
        for (origin, refused) in [
            ("http://localhost:3000", false),
            ("http://127.0.0.1", false),
            ("http://[::1]:8080", false),
            ("https://evil.example", true),
            ("http://localhost.evil.example", true),
            ("null", true),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::ORIGIN, HeaderValue::from_static(origin));
            assert_eq!(foreign_origin(&headers).is_some(), refused, "{origin}");
        }
        assert!(foreign_origin(&HeaderMap::new()).is_none(), "no Origin: not a browser");
    }

    #[test]
    fn a_response_goes_to_its_requests_stream_and_a_progress_to_its_tokens() {
        let mut routes = Routes::default();
        let (post, mut post_rx) = mpsc::channel(4);
        let (standing, mut standing_rx) = mpsc::channel(4);
        routes.requests.insert(Id::number(1), post);
        routes.tokens.insert("\"t\"".into(), Id::number(1));
        routes.standing = Some(standing);
        let progress = tools::progress(&serde_json::json!("t"), 1, "waiting");
        routes.stream_for(&progress).unwrap().try_send(progress).unwrap();
        let other = Message::Notification(message::Notification { method: "notifications/x".into(), params: None });
        routes.stream_for(&other).unwrap().try_send(other).unwrap();
        let response =
            Message::Response(message::Response { id: Some(Id::number(1)), outcome: Ok(serde_json::json!({})) });
        routes.stream_for(&response).unwrap().try_send(response).unwrap();
        assert!(matches!(post_rx.try_recv(), Ok(Message::Notification(n)) if n.method == tools::PROGRESS));
        assert!(matches!(post_rx.try_recv(), Ok(Message::Response(_))));
        assert!(matches!(standing_rx.try_recv(), Ok(Message::Notification(n)) if n.method == "notifications/x"));
        assert!(routes.requests.is_empty() && routes.tokens.is_empty(), "a request's routes go with its response");
    }
}
