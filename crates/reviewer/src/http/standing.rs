//! Standing decisions over HTTP: the API's `GET /api/standing`, `POST /api/standing` and
//! `POST /api/standing/{id}/revoke`, and the UI's standing page, its revoke buttons and the
//! card's "every identical call" form. A reviewer sees, makes and revokes standing decisions
//! of their own pools among the service's only.

use std::sync::Arc;

use airlock_records::review::standing::{ScopeKind, StandingBody, StandingCreated, StandingDecision, StandingList};
use airlock_records::time::now_ms;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::extract::{CsrfForm, Session};
use super::ui::{viewer, wants_json};
use super::{ApiError, refused_status};
use crate::auth::Reviewer;
use crate::desk::refusal::Grounds;
use crate::desk::{Desk, Refusal};
use crate::ui::pages;
use crate::web::Web;

/// `GET /api/standing`: the active standing decisions of the caller's pools, newest first.
pub async fn list(State(web): State<Arc<Web>>, reviewer: Reviewer) -> Result<Json<StandingList>, ApiError> {
    let pools = reviewer.pools_among(&web.pools);
    Ok(Json(StandingList { standing: web.store.active_standing(&pools, now_ms()).await? }))
}

/// `POST /api/standing`: answers a task with a [`StandingBody`] and makes the answer stand for
/// every identical call; `201` with the standing decision and the other tasks it decided.
pub async fn create(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    body: Bytes,
) -> Result<(StatusCode, Json<StandingCreated>), ApiError> {
    let body: StandingBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "expected {{\"task\", \"decision\", \"explanation\", \"scope\", \"seconds\", \"pattern\"}} as JSON: {e}"
        ))
    })?;
    Ok((StatusCode::CREATED, Json(desk.stand(&reviewer, body).await?)))
}

/// `POST /api/standing/{id}/revoke`: revokes a standing decision of the caller's pools; it as
/// revoked. It stops applying at once, on every process sharing the store.
pub async fn revoke(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(id): Path<i64>,
) -> Result<Json<StandingDecision>, ApiError> {
    Ok(Json(desk.revoke(&reviewer, id).await?))
}

/// `GET /standing`: the standing page, or back to the login without a session.
pub async fn page(State(web): State<Arc<Web>>, session: Option<Session>) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    let pools = session.pools(&web);
    let standing = web.store.active_standing(&pools, now_ms()).await?;
    Ok(Html(pages::standing(&viewer(&session, &pools), &standing)).into_response())
}

/// The fields of the card's "every identical call" form (its CSRF token is [`CsrfForm`]'s).
#[derive(Debug, Deserialize)]
pub struct StandingForm {
    /// A choice of the task.
    decision: String,
    /// Why, if the person said.
    #[serde(default)]
    explanation: Option<String>,
    /// The task's sample, run or pool.
    scope: ScopeKind,
    /// How long, in seconds.
    seconds: u64,
    /// The glob identical calls match.
    #[serde(default)]
    pattern: Option<String>,
}

/// `POST /ui/tasks/{id}/standing`: the card's "every identical call" form; JSON for the script
/// (`Accept: application/json`), else back to the list, or an error page.
pub async fn form(
    State(desk): State<Arc<Desk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    CsrfForm { session, form }: CsrfForm<StandingForm>,
) -> Result<Response, ApiError> {
    let wants_json = wants_json(&headers);
    let body = StandingBody {
        task: id,
        decision: form.decision,
        explanation: form.explanation,
        scope: form.scope,
        seconds: form.seconds,
        pattern: form.pattern,
    };
    match desk.stand(&session.reviewer, body).await {
        Ok(created) if wants_json => Ok((StatusCode::CREATED, Json(created)).into_response()),
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(refusal) if wants_json => Err(refusal.into()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

/// `POST /ui/standing/{id}/revoke`: the standing page's Revoke button; back to the page.
pub async fn revoke_form(
    State(desk): State<Arc<Desk>>,
    Path(id): Path<i64>,
    CsrfForm { session, .. }: CsrfForm<IgnoredAny>,
) -> Result<Response, ApiError> {
    match desk.revoke(&session.reviewer, id).await {
        Ok(_) => Ok(Redirect::to("/standing").into_response()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

/// A refused standing decision or revocation as a short page.
fn refused_page(refusal: &Refusal) -> Response {
    let message = match refusal.grounds() {
        Grounds::Invalid => format!("The standing decision was not made: {refusal}."),
        Grounds::NotFound if matches!(refusal, Refusal::NotFound) => "No such task among your pools.".to_owned(),
        Grounds::NotFound => format!("{refusal}."),
        Grounds::Conflict => format!("Nothing changed: {refusal}."),
        Grounds::Unavailable => "That could not be done; try again.".to_owned(),
    };
    let status = refused_status(refusal);
    (status, Html(pages::error(status.as_str(), &message))).into_response()
}

#[cfg(test)]
mod tests;
