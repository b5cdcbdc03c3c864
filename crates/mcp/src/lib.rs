//! The MCP proxy (`airlock mcp`): sits between any MCP client and any MCP server, passes
//! every message through, and asks the fleet about every `tools/call`: for approval before
//! the server sees it, and for review of its result before the client does.
//!
//! The proxy is a runner: each MCP session is a run (`mcp-<uuid>`), its calls are keyed by
//! their JSON-RPC request ids, and the server's tool annotations (from `tools/list`) go with
//! each request. A call the fleet rejects is answered with a tool error result
//! (`isError: true`) that carries the explanation the policy lets the model see; a terminate
//! answers the call with a JSON-RPC error and ends the session. Decisions that wait (for a
//! person) are reported to a client that gave a progress token, and fail closed at the
//! request's deadline.
//!
//! Layout:
//! - [`message`]: JSON-RPC messages, read once at the edge.
//! - [`tools`]: what the proxy reads of `tools/call` and `tools/list`, and the results and
//!   notifications it makes.
//! - [`gate`]: the approval and review requests, and what each decision makes the proxy do.
//! - [`session`]: one session between a client link and a server link.
//! - [`stdio`]: the stdio transport, both sides (the proxy's own stdio; a server command).
//! - [`sse`]: server-sent events, read and written.
//! - [`upstream`]: the server side over streamable HTTP (a server URL).
//! - [`listen`]: the client side over streamable HTTP (the proxy's endpoint).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod gate;
pub mod listen;
pub mod message;
pub mod session;
pub mod sse;
pub mod stdio;
pub mod tools;
pub mod upstream;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use airlock_telemetry::server::ServerLimits;
use airlock_transport::Transport;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::warn;

pub use gate::Gate;
pub use session::Ended;

/// How long a server command has to exit once its stdin closed, before it is killed.
pub const SERVER_GRACE: Duration = Duration::from_secs(5);

/// The MCP server behind the proxy.
#[derive(Debug, Clone)]
pub enum Server {
    /// A command the proxy starts (one per session), speaking MCP on its stdio.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A streamable HTTP endpoint.
    Url(reqwest::Url),
}

/// The proxy: the fleet it asks, and the server it fronts.
pub struct Proxy<T: Transport> {
    /// How calls are put to the fleet.
    pub gate: Arc<Gate<T>>,
    /// The server.
    pub server: Server,
    /// How often a client that gave a progress token hears of a call still waiting.
    pub progress_every: Duration,
}

/// What failed the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The server command could not be started.
    #[error("cannot start the MCP server {program}: {error}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        error: io::Error,
    },
    /// The server URL cannot be used.
    #[error(transparent)]
    Upstream(#[from] upstream::ClientError),
    /// The session ended other than by its client leaving.
    #[error(transparent)]
    Ended(#[from] Ended),
    /// The proxy's own stdio failed.
    #[error("the MCP client's stdio failed: {0}")]
    Stdio(io::Error),
}

/// A server side to close once its session ended.
pub enum Closing {
    /// A server command: closed as the stdio transport says.
    Process(stdio::ServerProcess),
    /// A server URL: its session deleted.
    Http(JoinHandle<()>),
}

// === impl Server ===

impl Server {
    /// The link to a new session of this server.
    pub fn connect(&self) -> Result<(session::Link, Closing), ProxyError> {
        match self {
            Server::Command { program, args } => {
                let (link, process) = stdio::spawn(program, args)
                    .map_err(|error| ProxyError::Spawn { program: program.clone(), error })?;
                Ok((link, Closing::Process(process)))
            }
            Server::Url(url) => {
                let (link, posting) = upstream::connect(url.clone())?;
                Ok((link, Closing::Http(posting)))
            }
        }
    }
}

impl Closing {
    /// Closes the server side (the session dropped its link).
    pub async fn close(self) {
        match self {
            Closing::Process(process) => {
                if let Err(e) = process.close(SERVER_GRACE).await {
                    warn!(error = %e, "Could not end the MCP server.");
                }
            }
            Closing::Http(posting) => {
                let _ = posting.await;
            }
        }
    }
}

// === impl Proxy ===

impl<T: Transport> Proxy<T> {
    /// Serves one session on the proxy's own stdin and stdout, until the client closes stdin
    /// (`Ok`), the server goes, or the fleet terminates a call.
    pub async fn serve_stdio(self: Arc<Self>) -> Result<(), ProxyError> {
        let (server, closing) = self.server.connect()?;
        let (client, writing) = stdio::pipe(tokio::io::stdin(), tokio::io::stdout(), true);
        let ended = session::run(self.gate.clone(), self.progress_every, client, server).await;
        let written = writing.await.unwrap_or(Ok(()));
        closing.close().await;
        ended?;
        written.map_err(ProxyError::Stdio)
    }

    /// Serves streamable HTTP at `path` on `listener` until `shutdown`, then ends every
    /// session.
    pub async fn serve_http(
        self: Arc<Self>,
        listener: TcpListener,
        path: &str,
        limits: ServerLimits,
        shutdown: impl Future<Output = ()>,
    ) {
        let (app, sessions) = listen::app(self, path);
        airlock_telemetry::server::serve(listener, app, limits, async move {
            shutdown.await;
            sessions.close_all();
        })
        .await;
    }
}
