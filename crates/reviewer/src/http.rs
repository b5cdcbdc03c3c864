//! The HTTP side: the JSON API (bearer tokens), the web UI (session cookie + CSRF token),
//! its live event stream (SSE) and its two static files, in one axum [`Router`] built by
//! [`app`].
//!
//! | route | what |
//! |---|---|
//! | `GET /api/tasks?pool=&tool=&run=&sample=&older_than=&sort=&q=&limit=&cursor=` | a page of the caller's pending tasks, with counts |
//! | `GET /api/tasks/{id}` | one task, in any state |
//! | `POST /api/tasks/{id}/decision` | `{"decision", "explanation"}` (a modify: `"arguments"`): answer a task |
//! | `GET /api/history?limit=N` | decided and withdrawn tasks, newest first |
//! | `GET /api/me` | the caller's name and pools |
//! | `GET /api/standing` | the active standing decisions of the caller's pools |
//! | `POST /api/standing` | `{"task", "decision", "scope", "seconds", "pattern"?}`: answer a task and every identical call |
//! | `POST /api/standing/{id}/revoke` | revoke a standing decision |
//! | `GET /?pool=&tool=…` | a page of the pending list, filtered (or the login page) |
//! | `GET /history` | the history |
//! | `GET /standing` | the active standing decisions, each with a Revoke button |
//! | `GET /events` | server-sent events: `added` / `removed` task ids, `resync` |
//! | `GET /ui/tasks/{id}` | one task's card (HTML), for live insertion |
//! | `GET /ui/pending?pool=&tool=…` | the counts, cards and pager of a page (HTML), to refresh it |
//! | `POST /ui/tasks/{id}/decision` | a decision from the UI (form) |
//! | `POST /ui/tasks/{id}/standing` | a decision for every identical call from the UI (form) |
//! | `POST /ui/standing/{id}/revoke` | a revocation from the UI (form) |
//! | `POST /login`, `POST /logout` | session |
//!
//! Layout:
//! - [`extract`]: who is asking, as extractors: a bearer token's [`Reviewer`](crate::auth::Reviewer)
//!   for the API, a cookie [`Session`](extract::Session) for the UI, [`SameOrigin`](extract::SameOrigin)
//!   and [`CsrfForm`](extract::CsrfForm) for the UI's state-changing posts. A handler that
//!   takes one cannot skip its check.
//! - [`api`]: the JSON API, the task view it shows, and the decision path the UI shares.
//! - [`ui`]: the pages, the card, login and logout, the UI's decisions.
//! - [`standing`]: standing decisions in the API and the UI.
//! - [`events`]: the UI's live event stream.
//! - [`security`]: the headers every response carries; the `Host` a public URL fixes.

pub mod api;
pub mod events;
pub mod extract;
pub mod security;
pub mod standing;
pub mod ui;

use std::sync::Arc;

use airlock_records::review::ErrorView;
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::shared::Shared;
use crate::store::StoreError;
use crate::ui::pages;

pub use api::{MAX_EXPLANATION, task_view};
pub use security::CSP;

/// The service's HTTP routes over `shared`.
pub fn app(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/tasks", get(api::list))
        .route("/api/tasks/{id}", get(api::task))
        .route("/api/tasks/{id}/decision", post(api::decide))
        .route("/api/history", get(api::history))
        .route("/api/me", get(api::me))
        .route("/api/standing", get(standing::list).post(standing::create))
        .route("/api/standing/{id}/revoke", post(standing::revoke))
        .route("/", get(ui::pending))
        .route("/history", get(ui::history))
        .route("/standing", get(standing::page))
        .route("/ui/tasks/{id}/standing", post(standing::form))
        .route("/ui/standing/{id}/revoke", post(standing::revoke_form))
        .route("/events", get(events::stream))
        .route("/ui/pending", get(ui::results))
        .route("/ui/tasks/{id}", get(ui::card))
        .route("/ui/tasks/{id}/decision", post(ui::decide))
        .route("/login", post(ui::login))
        .route("/logout", post(ui::logout))
        .route("/assets/app.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], pages::CSS) }))
        .route(
            "/assets/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], pages::JS) }),
        )
        .route(security::HEALTH, get(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), security::host))
        .layer(axum::middleware::map_response(security::headers))
        .with_state(shared)
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
    /// No such task among the caller's pools.
    NotFound,
    /// No such thing (named) among the caller's pools.
    NoSuch(&'static str),
    /// The request cannot be read.
    BadRequest(String),
    /// The decision is not one the task offers.
    Unprocessable(String),
    /// The task was decided or withdrawn before.
    Conflict(ErrorView),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Store(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error = |status: StatusCode, text: &str| (status, ErrorView { error: text.to_owned(), settled: None });
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
            ApiError::NotFound => error(StatusCode::NOT_FOUND, "no such task among your pools"),
            ApiError::NoSuch(what) => error(StatusCode::NOT_FOUND, what),
            ApiError::BadRequest(why) => error(StatusCode::BAD_REQUEST, &why),
            ApiError::Unprocessable(why) => error(StatusCode::UNPROCESSABLE_ENTITY, &why),
            ApiError::Conflict(body) => (StatusCode::CONFLICT, body),
            ApiError::Store(e) => {
                tracing::warn!(error = %e, "Store error while serving a request.");
                error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable; try again")
            }
        };
        (status, axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests;
