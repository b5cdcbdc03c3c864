//! The HTTP server every role's endpoints run on (the gateway's API, the reviewer's UI and
//! API, `/metrics`): axum's router over hyper's HTTP/1 connections, with the limits a server
//! facing many callers needs and `axum::serve` does not have.
//!
//! - A connection must send a complete request head within [`ServerLimits::header_read_timeout`]
//!   of opening, and of the end of each response; a half-sent request and an idle keep-alive
//!   connection are closed alike.
//! - A request's body must arrive within [`ServerLimits::body_read_timeout`] of its head; a
//!   body that is late fails the request (the handler's extractor answers `400`) and the
//!   connection is closed.
//! - At most [`ServerLimits::max_connections`] connections are served at once. The next one is
//!   accepted only when one closes: until then it waits in the kernel's listen queue, which
//!   costs the process no file descriptor, so no number of sockets can use up its descriptors.
//!
//! Each request carries its peer's address as `axum::extract::ConnectInfo<SocketAddr>`. On
//! shutdown the server stops accepting, closes idle connections, and returns once the
//! requests in progress have been answered.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::Request;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tower::ServiceExt as _;
use tracing::{debug, warn};

/// How long to wait before accepting again after an accept failed for want of resources.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long a client may take, and how many may be connected at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// How long a connection may go without sending a complete request head, from when it
    /// opens and from the end of each response: half-sent requests and idle keep-alive
    /// connections are closed after it.
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive, from the end of its head.
    pub body_read_timeout: Duration,
    /// Connections served at once; more wait to be accepted until one closes.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    /// 15 s for a request head, 30 s for a body, 512 connections.
    fn default() -> Self {
        ServerLimits {
            header_read_timeout: Duration::from_secs(15),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 512,
        }
    }
}

impl ServerLimits {
    /// What is wrong with these limits, if anything: every one must be above 0.
    pub fn problem(&self) -> Option<&'static str> {
        if self.header_read_timeout.is_zero() || self.body_read_timeout.is_zero() {
            Some("the header and body read timeouts must be above 0")
        } else if self.max_connections == 0 {
            Some("the connection cap must be at least 1")
        } else {
            None
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then lets the
/// requests in progress finish (see the module's documentation).
pub async fn serve(listener: TcpListener, app: Router, limits: ServerLimits, shutdown: impl Future<Output = ()>) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let mut shutdown = pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let body_read_timeout = limits.body_read_timeout;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let mut request = request.map(|body| timed(body, body_read_timeout));
            request.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(request)
        });
        let connection = connections.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                debug!(error = %e, %peer, "Connection ended with an error.");
            }
            drop(slot);
        });
    }
    drop(listener);
    connections.shutdown().await;
}

async fn accept_failed(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    // A client that gave up before it was accepted is no failure of the server.
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    // Out of descriptors or memory: accepting again at once would fail again at once.
    warn!(error = %error, backoff = ?ACCEPT_BACKOFF, "Accepting a connection failed.");
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}

/// `body`, failing once `timeout` has passed before its end.
fn timed(body: Incoming, timeout: Duration) -> Body {
    if body.is_end_stream() {
        return Body::new(body);
    }
    Body::new(Timed { body, deadline: Box::pin(tokio::time::sleep(timeout)), timeout })
}

/// A request body with a deadline.
struct Timed {
    body: Incoming,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

/// A request body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(Duration);

impl http_body::Body for Timed {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimedOut(self.timeout).into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
