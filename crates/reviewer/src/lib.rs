//! The reviewer service: where people decide the tool calls a policy escalates to a human.
//!
//! Policy workers publish a `HumanTask` to `<p>.human.<pool>`. The service stores each task
//! durably, then acknowledges it (a person may take hours; a delivery is never held open
//! while one thinks), shows it in a web UI and an HTTP API, and publishes the person's answer
//! as the step's `StepResult` to `<p>.results` through an outbox, so the chain goes on. Tasks
//! whose deadline passes get their step's `on_timeout` decision; tasks the runner that asked
//! withdraws (a `Cancel` on `<p>.cancels` from the broker user that published the request)
//! leave the UI unanswered.
//!
//! Layout:
//! - [`task`]: a stored task, the choices it offers, Inspect's explanations.
//! - [`desk`]: the decision desk, the one path that writes tasks: a person's decision checked
//!   (choices, dismiss, explanation, modify, approvals needed, conflicts, another reviewer's
//!   claim) and recorded, or refused with a typed [`desk::Refusal`]; deadlines' `on_timeout`;
//!   standing decisions made and applied; tasks stored and withdrawn; answers signed and
//!   handed to the outbox; claims taken and released ([`desk::claims`]); the fleet's control
//!   log followed ([`desk::control`]: incidents marked, runs switched, the
//!   pending tasks of a run it ends answered).
//! - [`modify`]: a person's edit of a call: new arguments for the same function.
//! - [`store`]: SQLite or PostgreSQL, one schema with migrations; dedup, first answer wins.
//! - [`triage`]: filters, orders and pages of the pending list, for thousands of tasks.
//! - [`intake`]: human queues → store → ack; the cancels queue; what can never be stored
//!   dead-lettered with its reason.
//! - [`canary`]: known-bad calls planted among a pool's real tasks at a rate, decided like
//!   any task, never sent; the catch rates per pool and reviewer, for admins.
//! - [`logged`]: untrusted text in the log, its control and bidi characters escaped.
//! - [`outbox`]: answers published with confirms, marked sent, resent after a restart.
//! - [`deadlines`]: `on_timeout` for tasks nobody answered in time; moves to the next pool
//!   for those nobody answered within their step's `reroute_after`; warnings before expiry.
//! - [`webhooks`]: `task.created`, `task.decided`, `task.expiring`, `task.expired` and
//!   `task.rerouted` paged to the endpoints of a pool, written with their change; the
//!   webhooks file.
//! - [`webhook_sender`]: the webhooks owed, leased per attempt, sent, retried.
//! - [`slack`]: the Slack app: tasks posted to a channel per pool with buttons and updated once
//!   decided (rows of the webhooks table), and button presses checked, mapped to reviewers and
//!   decided at the desk (`POST /slack/interactions`).
//! - [`standing`]: standing decisions: a reviewer's answer to every identical call, applied
//!   to pending tasks when made and to new tasks at intake.
//! - [`groups`]: identical pending calls across samples and runs, shown and answered as one.
//! - [`web`]: what request handlers read (reviewers, sessions, sign-ins, site, pools), and
//!   the change feed of the pending list.
//! - [`http`]: the axum router over an [`http::AppState`] whose [`desk::Desk`] and [`web::Web`]
//!   each route takes as it needs; [`http::extract`] (bearer [`auth::Reviewer`], cookie session,
//!   same origin, CSRF-checked forms as extractors), [`http::api`] (the JSON API, whose views
//!   are `airlock_records::review`'s), [`http::ui`] (pages, login, decisions from forms),
//!   [`http::control`] (incidents marked; runs listed and switched, for admins),
//!   [`http::events`] (server-sent events), [`http::security`] (headers of every response).
//! - [`auth`]: tokens file, token hashes, sessions, failed sign-ins, cookie and origin checks.
//! - [`site`]: the public URL, and the cookies, `Host` and origin it fixes.
//! - [`ui`]: display-safe text, escaping, markdown, the pages; [`ui::why`], why a task is
//!   here (who asked, the policy, the chain's answers before), for the card and the console;
//!   [`ui::protocol`], what a control protocol step did, its calls side by side.
//! - [`client`]: a small plain-HTTP client of the API, typed by the API's views, for the
//!   console and tests.
//! - [`run`] / [`Service`]: start, serve, stop in order.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod auth;
pub mod canary;
pub mod client;
pub mod deadlines;
pub mod desk;
#[cfg(test)]
mod fixtures;
pub mod groups;
pub mod http;
pub mod intake;
pub mod logged;
pub mod modify;
pub mod outbox;
pub mod site;
pub mod slack;
pub mod standing;
pub mod store;
pub mod task;
pub mod triage;
pub mod ui;
pub mod web;
pub mod webhook_sender;
pub mod webhooks;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use airlock_control::{ControlError, ControlLog};
use airlock_integrity::SigningKey;
use airlock_telemetry::metrics::Metrics;
use airlock_telemetry::server::{self, ServerLimits};
use airlock_transport::{Topology, Transport, TransportError};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::auth::Reviewers;
use crate::canary::{Canaries, Planter};
use crate::desk::control::{self as control, Control};
use crate::desk::{Claims, Desk};
use crate::http::AppState;
use crate::site::{PublicUrl, Site};
use crate::store::{Store, StoreError};
use crate::webhooks::Webhooks;

/// Deliveries of a human queue taken at once.
pub const PREFETCH: u16 = 32;

/// How a reviewer service runs.
#[derive(Debug, Clone)]
pub struct ReviewerConfig {
    /// The fleet's prefix.
    pub prefix: String,
    /// Where the named policies of tasks are read (as the workers' `--policy-dir`), so that
    /// their `incident:` rule ends the pending tasks of a run; without it only switches
    /// thrown by hand end the tasks of a named policy.
    pub policy_dir: Option<PathBuf>,
    /// The pools whose human queues this service consumes and shows.
    pub pools: Vec<String>,
    /// Where tasks are stored: `sqlite:PATH`, `sqlite::memory:` or `postgres://…`.
    pub store: String,
    /// The address the UI and the API listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// The URL browsers reach the service at, when it is fixed (behind a proxy): only its
    /// `Host` is served, only its origin may post, and `https` makes the session cookie
    /// `Secure` and `__Host-`. Without it, any `Host` is served over plain HTTP.
    pub public_url: Option<PublicUrl>,
    /// The HTTP server's read timeouts and connection cap.
    pub server: ServerLimits,
    /// Who may review.
    pub reviewers: Reviewers,
    /// Names this service's queue on the cancels exchange (`<p>.reply.<id>`). Processes that
    /// share a store may share it; services with their own stores need their own.
    pub instance: String,
    /// Where the service counts tasks taken and answers sent (shared with whoever serves the
    /// metrics).
    pub metrics: Arc<Metrics>,
    /// The key this service signs the answers it records with; workers take human answers
    /// only signed by a reviewer key they hold. `None` for a fleet that runs unsigned.
    pub signing_key: Option<Arc<SigningKey>>,
    /// The endpoints that page people about tasks (none: no webhooks).
    pub webhooks: Webhooks,
    /// The canaries planted among the pools' real tasks, and their rate (none: no canaries).
    pub canaries: Option<Canaries>,
    /// How long reviewers' claims on tasks last, and whether the UI claims the task a person
    /// opens.
    pub claims: Claims,
}

/// Why the service could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ReviewerError {
    /// The configuration is not usable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The store failed to open or migrate.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The broker failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The control log could not be read to its end.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl ReviewerConfig {
    /// Checks what can be checked before touching the network.
    pub fn validate(&self) -> Result<(), ReviewerError> {
        if self.pools.is_empty() {
            return Err(ReviewerError::Config("at least one pool is needed".into()));
        }
        for pool in &self.pools {
            if pool.is_empty() || !pool.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
                return Err(ReviewerError::Config(format!("pool '{pool}': use letters, digits, - _ .")));
            }
        }
        if self.instance.is_empty() {
            return Err(ReviewerError::Config("the instance name is empty".into()));
        }
        if let Some(dir) = self.policy_dir.as_ref().filter(|dir| !dir.is_dir()) {
            return Err(ReviewerError::Config(format!("policy directory {}: not a directory", dir.display())));
        }
        if let Some(problem) = self.server.problem() {
            return Err(ReviewerError::Config(problem.into()));
        }
        let retry = &self.webhooks.retry;
        if retry.first_delay.is_zero() || retry.attempt_timeout.is_zero() {
            return Err(ReviewerError::Config("webhook delays and timeouts must be above 0".into()));
        }
        if let Some(problem) = self.webhooks.slack.as_ref().and_then(|s| s.problem(&self.pools, &self.reviewers)) {
            return Err(ReviewerError::Config(problem));
        }
        if let Some(problem) = self.claims.problem() {
            return Err(ReviewerError::Config(problem));
        }
        if let Some(canaries) = &self.canaries {
            canaries.check_pools(&self.pools).map_err(|e| ReviewerError::Config(e.to_string()))?;
        }
        Ok(())
    }
}

/// A default instance name: one per store, so processes sharing a store share the queue of
/// cancels (each cancel is applied once to the shared store) and a restarted service finds
/// the cancels that arrived while it was down.
pub fn instance_for_store(store: &str) -> String {
    format!("reviewer-{}", &auth::sha256_hex(store)[..12])
}

/// Runs the service until `shutdown` resolves, then stops it in order and closes the transport.
pub async fn run<T: Transport>(
    transport: T,
    config: ReviewerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ReviewerError> {
    let metrics = config.metrics.clone();
    airlock_telemetry::service::run(transport.clone(), metrics, Service::start(transport, config), shutdown).await
}

/// A started service.
pub struct Service {
    state: AppState,
    addr: SocketAddr,
    consumers: TaskTracker,
    background: TaskTracker,
    server: JoinHandle<()>,
}

impl Service {
    /// Opens the store, declares the topology, binds the listener, and starts consuming,
    /// sending, timing out and serving.
    pub async fn start<T: Transport>(transport: T, config: ReviewerConfig) -> Result<Self, ReviewerError> {
        config.validate()?;
        let store = Store::open(&config.store).await?;
        info!(backend = store.backend(), location = %store::redact(&config.store), "Store open.");
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ReviewerError::Listen { addr: config.listen, source })?;
        let addr = listener.local_addr().map_err(|source| ReviewerError::Listen { addr: config.listen, source })?;

        // The control log is declared with the service's own part, so the service starts
        // before any worker has declared the fleet.
        let mut own = Topology::empty(config.prefix.clone()).with_reply_queue(&config.instance).with_control_log();
        for pool in &config.pools {
            own = own.with_human_pool(pool);
        }
        let (cancels_exchange, cancels_queue) = (own.cancels_exchange(), own.reply_queue(&config.instance));
        let own = own.with_binding(cancels_exchange, cancels_queue.clone(), "");
        let topology = Topology::new(config.prefix.clone());
        transport.declare_own(&topology, &own).await?;
        // Pending tasks of a run terminated meanwhile are answered once the log is read.
        let log = ControlLog::open(transport.clone(), &topology, config.instance.clone(), Some(config.metrics.clone()))
            .await?;

        let site = Site { public_url: config.public_url.clone(), claims: config.claims, ..Site::default() };
        let (state, answers) = AppState::observed(
            store,
            config.reviewers.clone(),
            config.pools.clone(),
            site,
            config.metrics.clone(),
            config.signing_key.clone(),
            config.webhooks.clone(),
        );
        let (desk, stop) = (&state.desk, state.stop());
        desk.follow(Control::new(log, config.instance.clone(), config.policy_dir.clone()));
        let background = TaskTracker::new();
        let results = topology.results_route();
        background.spawn(outbox::run(desk.clone(), stop.clone(), transport.clone(), results, answers));
        background.spawn(deadlines::run(desk.clone(), stop.clone(), transport.clone(), topology.clone()));
        background.spawn(webhook_sender::run(desk.clone(), stop.clone()));
        background.spawn(web::watch(desk.clone(), state.web.clone()));
        background.spawn(control::watch(desk.clone(), stop.clone()));

        let consumers = TaskTracker::new();
        let mut pools = Vec::with_capacity(config.pools.len());
        for pool in &config.pools {
            pools.push((pool.clone(), transport.consume(&topology.human_queue(pool), PREFETCH).await?));
        }
        let planter = config.canaries.clone().map(|canaries| Arc::new(Planter::new(canaries, desk.clone())));
        let taking =
            intake::consume_pools(desk.clone(), stop.clone(), transport.clone(), topology.clone(), pools, planter);
        consumers.spawn(taking);
        let cancels = transport.consume(&cancels_queue, PREFETCH).await?;
        consumers.spawn(intake::consume_cancels(desk.clone(), stop.clone(), transport.clone(), topology, cancels));

        let serving = stop.clone().cancelled_owned();
        let server = tokio::spawn(server::serve(listener, http::app(state.clone()), config.server, serving));
        let (webhooks, slack) = (config.webhooks.endpoints.len(), config.webhooks.slack.is_some());
        info!(pools = ?config.pools, %addr, reviewers = config.reviewers.len(), webhooks, slack, "Reviewer service started.");
        Ok(Service { state, addr, consumers, background, server })
    }

    /// The address the UI and the API listen on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The decision desk (and through it the store), for embedding and tests.
    pub fn desk(&self) -> &Arc<Desk> {
        &self.state.desk
    }

    /// Stops in order: stop consuming and settle what is in hand, stop serving (event streams
    /// end), let answers being published finish, close the store; all within
    /// [`SHUTDOWN_GRACE`](airlock_transport::SHUTDOWN_GRACE). Unsent answers stay in the outbox for the next start.
    pub async fn stop(self) {
        let Service { state, consumers, background, server, .. } = self;
        state.stop().cancel();
        let stopping = async {
            consumers.close();
            consumers.wait().await;
            let _ = server.await;
            background.close();
            background.wait().await;
        };
        if tokio::time::timeout(airlock_transport::SHUTDOWN_GRACE, stopping).await.is_err() {
            warn!(grace = ?airlock_transport::SHUTDOWN_GRACE, "The reviewer service did not stop in time.");
        }
        state.desk.store().close().await;
        info!("Reviewer service stopped.");
    }
}

impl airlock_telemetry::service::Started for Service {
    fn ready(&self) {
        let public_url = self.state.web.site.public_url.as_ref();
        let url = public_url.map_or_else(|| format!("http://{}", self.addr), |url| url.to_string());
        info!(%url, "Reviewer service ready.");
    }

    fn stop(self) -> impl Future<Output = ()> {
        Service::stop(self)
    }
}
