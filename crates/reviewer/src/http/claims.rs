//! Claims over HTTP: the API's `POST` and `DELETE /api/tasks/{id}/claim`, and the card's Claim
//! and Release buttons (`POST /ui/tasks/{id}/claim`, `POST /ui/tasks/{id}/release`). The rules
//! are the [`Desk`]'s ([`crate::desk::claims`]); these only translate.

use std::sync::Arc;

use airlock_records::review::claim::{ClaimBody, Claimed};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::de::IgnoredAny;

use super::ApiError;
use super::extract::CsrfForm;
use super::ui::{refused_page, wants_json};
use crate::auth::Reviewer;
use crate::desk::Desk;

/// `POST /api/tasks/{id}/claim`: claims a pending task of the caller's pools for the
/// [`ClaimBody`]'s seconds (an empty body: the service's default), or extends the caller's own
/// claim; `409` naming the holder while another reviewer holds it.
pub async fn claim(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Claimed>, ApiError> {
    let body: ClaimBody = if body.iter().all(u8::is_ascii_whitespace) {
        ClaimBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::BadRequest(format!("expected {{\"seconds\": N}} as JSON, or no body: {e}")))?
    };
    let claim = desk.claim(&reviewer, &id, body.seconds).await?;
    Ok(Json(Claimed { task: id, claim }))
}

/// `DELETE /api/tasks/{id}/claim`: releases the caller's claim (anyone's, with the pool's
/// override); `204`, also when no claim held the task.
pub async fn release(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    desk.release(&reviewer, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /ui/tasks/{id}/claim`: the card's Claim (or Extend) button, and the script's claim of
/// the task a person opens, for the service's default time; JSON for the script, else back
/// to the list, or an error page.
pub async fn claim_form(
    State(desk): State<Arc<Desk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    CsrfForm { session, .. }: CsrfForm<IgnoredAny>,
) -> Result<Response, ApiError> {
    match desk.claim(&session.reviewer, &id, None).await {
        Ok(claim) if wants_json(&headers) => Ok(Json(Claimed { task: id, claim }).into_response()),
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(refusal) if wants_json(&headers) => Err(refusal.into()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

/// `POST /ui/tasks/{id}/release`: the card's Release button; `204` for the script, else back to
/// the list, or an error page.
pub async fn release_form(
    State(desk): State<Arc<Desk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    CsrfForm { session, .. }: CsrfForm<IgnoredAny>,
) -> Result<Response, ApiError> {
    match desk.release(&session.reviewer, &id).await {
        Ok(()) if wants_json(&headers) => Ok(StatusCode::NO_CONTENT.into_response()),
        Ok(()) => Ok(Redirect::to("/").into_response()),
        Err(refusal) if wants_json(&headers) => Err(refusal.into()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

#[cfg(test)]
mod tests;
