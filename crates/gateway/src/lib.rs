//! The gateway: an HTTP service in front of the fleet, for agent frameworks that are not
//! Inspect. A caller posts a tool call (`POST /v1/approvals`, `POST /v1/reviews`) with a
//! bearer token; the gateway asks the fleet through one runner client, with every call
//! pending on it at once, and gives the decision back by holding the response (`Prefer:
//! wait=N`), by a poll (`GET /v1/decisions/{id}`), or as a signed webhook to the call's
//! `callback_url`. Retries are recognised by their idempotency key and never reach the
//! fleet twice. Each token asks in a namespace of its own: its name is the tenant of every
//! call key the gateway sends.
//!
//! Layout:
//! - [`claude_code`]: Claude Code's `PreToolUse` and `PostToolUse` hooks as requests, and the
//!   decisions as the hooks' output.
//! - [`submission`]: the request body, checked field by field, and the wire request it becomes.
//! - [`tokens`]: the tokens file, bearer tokens, which policies a caller may use.
//! - [`limit`]: per-caller rate limits (token buckets).
//! - [`decisions`]: the records of requests sent, by id and by idempotency key; waiters;
//!   each caller's quota of pending requests and bytes; [`decisions::store`], the SQLite
//!   file they survive a restart in.
//! - [`callback`]: which callback URLs are refused (loopback, private, metadata, …), when
//!   taken and at every connection.
//! - [`state`]: what the routes share, the [`state::Fleet`] asked, and sending one request.
//! - [`webhook`]: decisions delivered with retries (signed by `airlock_webhook`), and
//!   [`webhook::log`], the delivery log a restarted gateway resumes from.
//! - [`answer`]: the status and error body an outcome answers with, in a response and in
//!   a webhook's event.
//! - [`openapi`]: the OpenAPI document served, with the limits in force.
//! - [`http`]: the axum router, its extractors and errors.
//! - [`run`] / [`Service`]: start, serve, stop in order.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod answer;
pub mod callback;
pub mod claude_code;
pub mod decisions;
pub mod http;
pub mod limit;
pub mod openapi;
mod sqlite;
pub mod state;
pub mod submission;
pub mod tokens;
pub mod webhook;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError, Repeats, ReplyTrust};
use airlock_telemetry::metrics::Metrics;
use airlock_telemetry::server::{self, ServerLimits};
use airlock_transport::Transport;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::decisions::store::{Store, StoreError};
use crate::decisions::{Decisions, Quota};
use crate::limit::RateConfig;
use crate::state::Shared;
use crate::tokens::Tokens;
use crate::webhook::log::{DeliveryLog, LogError};
use crate::webhook::{RetryPolicy, WebhookSecret};

/// How a gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The fleet's prefix.
    pub prefix: String,
    /// A name unique to this gateway process; it names its reply queue.
    pub runner_id: String,
    /// The address the API listens on (port 0: any free port).
    pub listen: SocketAddr,
    /// Who may ask.
    pub tokens: Tokens,
    /// Which decisions the gateway takes: those the fleet's keys prove, or (chosen explicitly)
    /// any, and then its client warns at every start.
    pub replies: ReplyTrust,
    /// Sizes, waits and rates.
    pub limits: Limits,
    /// How callbacks are signed and retried; `None`: requests with a `callback_url` are refused.
    pub webhooks: Option<WebhookConfig>,
    /// The records store (a SQLite file): decisions and idempotency keys survive a restart;
    /// `None` keeps them in memory only.
    pub store: Option<PathBuf>,
    /// Where requests, decisions waiting and webhooks are counted (the role's `/metrics`).
    pub metrics: Arc<Metrics>,
}

/// Sizes, waits and rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The longest `Prefer: wait` honoured.
    pub max_wait: Duration,
    /// How long the fleet may take when a request gives no `timeout`.
    pub default_timeout: Duration,
    /// The longest `timeout` a request may give.
    pub max_timeout: Duration,
    /// How long a decision stays readable (and its idempotency key remembered) once made.
    pub retention: Duration,
    /// Each caller's rate.
    pub rate: RateConfig,
    /// The HTTP server's read timeouts and connection cap.
    pub server: ServerLimits,
    /// How many requests, and bytes of request bodies, each caller may have pending.
    pub pending: Quota,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 1024 * 1024,
            max_wait: Duration::from_secs(60),
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(24 * 3600),
            retention: Duration::from_secs(3600),
            rate: RateConfig::default(),
            server: ServerLimits::default(),
            pending: Quota::default(),
        }
    }
}

/// How callbacks are signed and retried.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The `whsec_…` secret.
    pub secret: WebhookSecret,
    /// Backoff and retry period.
    pub retry: RetryPolicy,
    /// The delivery log (a SQLite file); `None` keeps deliveries in memory only, and a
    /// restart drops those still owed.
    pub log: Option<PathBuf>,
    /// Whether callback URLs may name loopback, link-local, private and metadata addresses
    /// ([`callback`]).
    pub allow_private_callbacks: bool,
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The configuration is not usable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The runner client could not start (the broker, the fleet's keys).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The webhook client could not be built.
    #[error(transparent)]
    Webhooks(#[from] webhook::ClientError),
    /// The webhook delivery log could not be opened or read.
    #[error(transparent)]
    WebhookLog(#[from] LogError),
    /// The records store could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl GatewayConfig {
    /// Checks what can be checked before touching the network.
    pub fn validate(&self) -> Result<(), GatewayError> {
        let limits = &self.limits;
        if self.tokens.is_empty() {
            return Err(GatewayError::Config("the tokens file lists nobody".into()));
        }
        if limits.max_body == 0 || limits.default_timeout.is_zero() || limits.default_timeout > limits.max_timeout {
            return Err(GatewayError::Config("the body limit and timeouts must be above 0, default ≤ max".into()));
        }
        if !(limits.rate.per_second > 0.0 && limits.rate.per_second.is_finite()) || limits.rate.burst == 0 {
            return Err(GatewayError::Config("the rate and the burst must be above 0".into()));
        }
        if let Some(problem) = limits.server.problem() {
            return Err(GatewayError::Config(problem.into()));
        }
        if limits.pending.requests == 0 || limits.pending.bytes < limits.max_body {
            return Err(GatewayError::Config(
                "each token must be allowed a pending request, and pending bytes at least the body limit".into(),
            ));
        }
        if let Some(webhooks) = &self.webhooks
            && (webhooks.retry.first_delay.is_zero() || webhooks.retry.attempt_timeout.is_zero())
        {
            return Err(GatewayError::Config("webhook delays and timeouts must be above 0".into()));
        }
        Ok(())
    }
}

/// Runs the gateway until `shutdown` resolves, then stops it in order and closes the transport.
pub async fn run<T: Transport>(
    transport: T,
    config: GatewayConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), GatewayError> {
    let metrics = config.metrics.clone();
    airlock_telemetry::service::run(transport.clone(), metrics, Service::start(transport, config), shutdown).await
}

/// A started gateway.
pub struct Service {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: JoinHandle<()>,
    purger: JoinHandle<()>,
}

impl Service {
    /// Starts the runner client on `transport`, binds the listener and serves.
    pub async fn start<T: Transport>(transport: T, config: GatewayConfig) -> Result<Self, GatewayError> {
        config.validate()?;
        let webhooks = match config.webhooks.clone() {
            None => None,
            Some(WebhookConfig { secret, retry, log, allow_private_callbacks }) => {
                if allow_private_callbacks {
                    warn!("Callbacks may go to loopback, private and metadata addresses (--allow-private-callbacks).");
                }
                let webhooks = webhook::Webhooks::new(secret, retry, config.metrics.clone(), allow_private_callbacks)?;
                Some(match log {
                    Some(path) => webhooks.with_log(DeliveryLog::open(&path).await?),
                    None => webhooks,
                })
            }
        };
        let decisions = match &config.store {
            Some(path) => Some(
                Decisions::restore(config.limits.retention, config.limits.pending, Store::open(path).await?).await?,
            ),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| GatewayError::Listen { addr: config.listen, source })?;
        let addr = listener.local_addr().map_err(|source| GatewayError::Listen { addr: config.listen, source })?;
        let client = Client::connect(
            transport,
            ClientConfig {
                prefix: config.prefix.clone(),
                runner_id: config.runner_id.clone(),
                default_timeout: config.limits.default_timeout,
                replies: config.replies.clone(),
                repeats: Repeats::default(),
            },
        )
        .await?;
        let mut shared = Shared::new(Arc::new(client), config.tokens.clone(), config.limits, webhooks, config.metrics);
        if let Some(decisions) = decisions {
            info!(records = decisions.len(), "Records read from the store.");
            shared = shared.with_decisions(decisions);
        }
        let shared = Arc::new(shared);
        let resumed = shared.resume_webhooks().await?;
        if resumed > 0 {
            info!(webhooks = resumed, "Resuming webhooks from the delivery log.");
        }
        Ok(Self::serve(shared, listener, addr))
    }

    /// Serves `shared` on `listener` (tests give a fleet of their own).
    pub fn serve(shared: Arc<Shared>, listener: tokio::net::TcpListener, addr: SocketAddr) -> Self {
        let purger = tokio::spawn({
            let shared = shared.clone();
            async move { shared.decisions.purge().await }
        });
        let app = http::app(shared.clone());
        let stop = shared.stop.clone();
        let server = tokio::spawn(server::serve(listener, app, shared.limits.server, stop.cancelled_owned()));
        let webhooks = match &shared.webhooks {
            None => "off",
            Some(webhooks) if webhooks.logged() => "logged",
            Some(_) => "in memory",
        };
        let records = if shared.decisions.stored() { "stored" } else { "in memory" };
        info!(%addr, callers = shared.tokens.len(), webhooks, records, "Gateway started.");
        Service { shared, addr, server, purger }
    }

    /// The address the API listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops in order: waiting responses answer 202 at once and the server stops taking
    /// requests; the fleet client closes (pending calls end unanswered, their records settled
    /// as `gateway_restarted`); webhooks under way get the rest of
    /// [`SHUTDOWN_GRACE`](airlock_transport::SHUTDOWN_GRACE), except that, with a delivery
    /// log, one waiting for its next attempt stays in the log for the next start; then the
    /// records store closes.
    pub async fn stop(self) {
        let Service { shared, server, purger, .. } = self;
        shared.stop.cancel();
        // Nothing is forgotten while stopping: the store closes with every record in it.
        purger.abort();
        let stopping = async {
            let _ = server.await;
            shared.fleet.close().await;
            shared.tasks.close();
            shared.tasks.wait().await;
            if let Some(webhooks) = &shared.webhooks {
                webhooks.close().await;
            }
            shared.decisions.close().await;
        };
        if tokio::time::timeout(airlock_transport::SHUTDOWN_GRACE, stopping).await.is_err() {
            warn!(grace = ?airlock_transport::SHUTDOWN_GRACE, "The gateway did not stop in time.");
        }
        info!("Gateway stopped.");
    }
}

impl airlock_telemetry::service::Started for Service {
    fn ready(&self) {
        info!(url = %format!("http://{}", self.addr), "Gateway ready.");
    }

    fn stop(self) -> impl Future<Output = ()> {
        Service::stop(self)
    }
}

/// The gateway's runner id on a broker user: `<user>.gateway-<uuid>`, as a least-privilege
/// runner user's reply queue must be named (`airlock topology definitions`).
pub fn runner_id(user: &str) -> String {
    format!("{user}.gateway-{}", uuid::Uuid::now_v7())
}
