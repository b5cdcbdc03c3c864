//! The HTTP side: the JSON API (bearer tokens), the web UI (session cookie + CSRF token),
//! its live event stream (SSE) and its two static files, in one axum [`Router`] built by
//! [`app`].
//!
//! | route | what |
//! |---|---|
//! | `GET /api/tasks?pool=&tool=&run=&sample=&older_than=&sort=&q=&limit=&cursor=` | a page of the caller's pending tasks, with counts |
//! | `GET /api/tasks/{id}` | one task, in any state |
//! | `POST /api/tasks/{id}/decision` | `{"decision", "explanation"}` (a modify: `"arguments"`; an attack: `"incident": true`, `"note"`): answer a task |
//! | `POST /api/tasks/{id}/incident` | `{"note"}`: mark a task, pending or decided, as an incident |
//! | `POST /api/tasks/{id}/claim` | `{"seconds"}` (optional): hold a pending task; `409` while another reviewer holds it |
//! | `DELETE /api/tasks/{id}/claim` | release a claim (the holder's, or anyone's with the pool's override) |
//! | `GET /api/history?limit=N` | decided and withdrawn tasks, newest first |
//! | `GET /api/me` | the caller's name and pools |
//! | `GET /api/standing` | the active standing decisions of the caller's pools |
//! | `POST /api/standing` | `{"task", "decision", "scope", "seconds", "pattern"?}`: answer a task and every identical call |
//! | `POST /api/standing/{id}/revoke` | revoke a standing decision |
//! | `GET /api/groups?limit=N` | the groups of identical pending calls in the caller's pools, the largest first |
//! | `POST /api/groups/{group}/decision` | `{"decision", "explanation", "count"}`: answer every task of a group, confirmed by its count |
//! | `GET /api/canaries?limit=N` | admins only: the canaries' catch rates per pool and reviewer |
//! | `GET /api/runs` | admins only: the runs under control |
//! | `POST /api/runs/{run}/pause\|resume\|terminate` | admins only: `{"tenant", "reason", "pool"}`, all optional: a switch on a run |
//! | `GET /?pool=&tool=…` | a page of the pending list, filtered (or the login page) |
//! | `GET /groups` | identical pending calls, grouped, each group with its count and decisions |
//! | `GET /groups/{group}/confirm?decision=&explanation=&count=` | the confirmation of a group decision |
//! | `GET /history` | the history |
//! | `GET /standing` | the active standing decisions, each with a Revoke button |
//! | `GET /canaries` | admins only: the canaries' catch rates |
//! | `GET /runs` | admins only: the runs under control, and forms to switch them |
//! | `GET /events` | server-sent events: `added` / `removed` / `claimed` task ids, `resync` |
//! | `GET /ui/tasks/{id}` | one task's card (HTML), for live insertion |
//! | `GET /ui/pending?pool=&tool=…` | the counts, cards and pager of a page (HTML), to refresh it |
//! | `POST /ui/tasks/{id}/decision` | a decision from the UI (form) |
//! | `POST /ui/tasks/{id}/standing` | a decision for every identical call from the UI (form) |
//! | `POST /ui/standing/{id}/revoke` | a revocation from the UI (form) |
//! | `POST /ui/groups/{group}/decision` | a confirmed group decision from the UI (form) |
//! | `POST /ui/tasks/{id}/incident` | an incident mark from the UI (form) |
//! | `POST /ui/tasks/{id}/claim`, `POST /ui/tasks/{id}/release` | a claim or release from the UI (form) |
//! | `POST /ui/runs` | a switch on a run from the UI (form; admins only) |
//! | `POST /slack/interactions` | Slack's button presses, signed by Slack ([`slack::interactions`]; no session) |
//! | `POST /login`, `POST /logout` | session |
//!
//! Layout:
//! - [`extract`]: who is asking, as extractors: a bearer token's [`Reviewer`](crate::auth::Reviewer)
//!   for the API, a cookie [`Session`](extract::Session) for the UI, [`SameOrigin`](extract::SameOrigin)
//!   and [`CsrfForm`](extract::CsrfForm) for the UI's state-changing posts. A handler that
//!   takes one cannot skip its check.
//! - [`api`]: the JSON API and the task view it shows.
//! - [`ui`]: the pages, the card, login and logout, the UI's decisions.
//! - [`standing`]: standing decisions in the API and the UI.
//! - [`groups`]: identical calls grouped and decided at once, in the API and the UI.
//! - [`canaries`]: the canaries' catch rates in the API and the UI, for admins.
//! - [`claims`]: claims taken and released in the API and the UI.
//! - [`control`]: incidents marked and, for admins, runs switched, in the API and the UI.
//! - [`events`]: the UI's live event stream.
//! - [`security`]: the headers every response carries; the `Host` a public URL fixes.
//!
//! Each handler takes the part of the [`AppState`] it needs through axum's [`FromRef`]: the
//! [`Web`] side to read and to know who asks, the [`Desk`] to decide. Decisions are the
//! desk's; a handler translates its [`Refusal`] into JSON or a page.

pub mod api;
pub mod canaries;
pub mod claims;
pub mod control;
pub mod events;
pub mod extract;
pub mod groups;
pub mod security;
pub mod standing;
pub mod ui;

use std::sync::Arc;

use airlock_integrity::SigningKey;
use airlock_records::review::ErrorView;
use airlock_telemetry::metrics::Metrics;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::Reviewers;
use crate::desk::refusal::Grounds;
use crate::desk::{Desk, Refusal};
use crate::site::Site;
use crate::slack;
use crate::store::{OutboxEntry, Store, StoreError};
use crate::ui::pages;
use crate::web::Web;
use crate::webhooks::Webhooks;

pub use api::task_view;
pub use security::CSP;

/// What the routes are given, each taking its part: the desk and the web side of one
/// process, over one store, stopped by one token.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The one path that writes tasks.
    pub desk: Arc<Desk>,
    /// What request handlers read and who may ask.
    pub web: Arc<Web>,
}

impl AppState {
    /// The desk and web side over `store` for `reviewers` and `pools`, with the defaults of
    /// [`AppState::observed`]; and the receiving end of the answers to publish.
    pub fn new(store: Store, reviewers: Reviewers, pools: Vec<String>) -> (Self, mpsc::UnboundedReceiver<OutboxEntry>) {
        AppState::observed(store, reviewers, pools, Site::default(), Arc::default(), None, Webhooks::default())
    }

    /// [`AppState::new`], serving browsers as `site` says, counting in `metrics`, signing
    /// answers with `signer` and paging people through `webhooks`.
    pub fn observed(
        store: Store,
        reviewers: Reviewers,
        pools: Vec<String>,
        site: Site,
        metrics: Arc<Metrics>,
        signer: Option<Arc<SigningKey>>,
        webhooks: Webhooks,
    ) -> (Self, mpsc::UnboundedReceiver<OutboxEntry>) {
        let (desk, answers) =
            Desk::new(store.clone(), pools.clone(), site.public_url.clone(), webhooks, metrics, signer, site.claims);
        let web = Arc::new(Web::new(store, reviewers, pools, site, CancellationToken::new()));
        (AppState { desk, web }, answers)
    }

    /// Resolves when the service stops.
    pub fn stop(&self) -> &CancellationToken {
        &self.web.stop
    }
}

impl FromRef<AppState> for Arc<Desk> {
    fn from_ref(state: &AppState) -> Self {
        state.desk.clone()
    }
}

impl FromRef<AppState> for Arc<Web> {
    fn from_ref(state: &AppState) -> Self {
        state.web.clone()
    }
}

/// The service's HTTP routes over `state`.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/api/tasks", get(api::list))
        .route("/api/tasks/{id}", get(api::task))
        .route("/api/tasks/{id}/decision", post(api::decide))
        .route("/api/history", get(api::history))
        .route("/api/me", get(api::me))
        .route("/api/standing", get(standing::list).post(standing::create))
        .route("/api/standing/{id}/revoke", post(standing::revoke))
        .route("/api/groups", get(groups::list))
        .route("/api/groups/{group}/decision", post(groups::decide))
        .route("/api/canaries", get(canaries::list))
        .route("/api/tasks/{id}/incident", post(control::incident))
        .route("/api/tasks/{id}/claim", post(claims::claim).delete(claims::release))
        .route("/ui/tasks/{id}/claim", post(claims::claim_form))
        .route("/ui/tasks/{id}/release", post(claims::release_form))
        .route("/api/runs", get(control::runs))
        .merge(control::switches())
        .route("/", get(ui::pending))
        .route("/history", get(ui::history))
        .route("/standing", get(standing::page))
        .route("/groups", get(groups::page))
        .route("/groups/{group}/confirm", get(groups::confirm))
        .route("/ui/groups/{group}/decision", post(groups::form))
        .route("/canaries", get(canaries::page))
        .route("/ui/tasks/{id}/standing", post(standing::form))
        .route("/ui/standing/{id}/revoke", post(standing::revoke_form))
        .route("/runs", get(control::page))
        .route("/ui/runs", post(control::switch_form))
        .route("/ui/tasks/{id}/incident", post(control::incident_form))
        .route("/events", get(events::stream))
        .route("/ui/pending", get(ui::results))
        .route("/ui/tasks/{id}", get(ui::card))
        .route("/ui/tasks/{id}/decision", post(ui::decide))
        .route(
            slack::interactions::PATH,
            post(slack::interactions::interactions).layer(DefaultBodyLimit::max(slack::interactions::BODY_LIMIT)),
        )
        .route("/login", post(ui::login))
        .route("/logout", post(ui::logout))
        .route("/assets/app.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], pages::CSS) }))
        .route(
            "/assets/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], pages::JS) }),
        )
        .route(security::HEALTH, get(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(state.web.clone(), security::host))
        .layer(axum::middleware::map_response(security::headers))
        .with_state(state)
}

/// Why a request failed, as JSON `{"error": …}` with its status.
#[derive(Debug)]
pub enum ApiError {
    /// No valid token or session.
    Unauthorized,
    /// A UI request without the session's CSRF token or from another origin.
    Forbidden(&'static str),
    /// A request for another host than the public URL's.
    Misdirected,
    /// The request cannot be read.
    BadRequest(String),
    /// The desk refused.
    Refused(Refusal),
    /// The store failed.
    Store(StoreError),
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        ApiError::Refused(refusal)
    }
}

/// The status of a refusal: `404`, `422`, `409` or `503`.
pub(crate) fn refused_status(refusal: &Refusal) -> StatusCode {
    match refusal.grounds() {
        Grounds::NotFound => StatusCode::NOT_FOUND,
        Grounds::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        Grounds::Conflict => StatusCode::CONFLICT,
        Grounds::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Store(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error =
            |status: StatusCode, text: &str| (status, ErrorView { error: text.to_owned(), settled: None, claim: None });
        let (status, body) = match self {
            ApiError::Unauthorized => {
                let (status, body) =
                    error(StatusCode::UNAUTHORIZED, "a valid token is required (Authorization: Bearer …)");
                let mut response = (status, axum::Json(body)).into_response();
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return response;
            }
            ApiError::Forbidden(why) => error(StatusCode::FORBIDDEN, why),
            ApiError::Misdirected => error(StatusCode::MISDIRECTED_REQUEST, "this service does not serve that host"),
            ApiError::BadRequest(why) => error(StatusCode::BAD_REQUEST, &why),
            ApiError::Refused(Refusal::Store(e)) | ApiError::Store(e) => {
                tracing::warn!(error = %e, "Store error while serving a request.");
                error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable; try again")
            }
            ApiError::Refused(refusal) => {
                let view = ErrorView { error: refusal.to_string(), settled: refusal.settled(), claim: refusal.claim() };
                (refused_status(&refusal), view)
            }
        };
        (status, axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests;
