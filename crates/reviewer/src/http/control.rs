//! The fleet's control over HTTP: a task marked as an incident (the API's
//! `POST /api/tasks/{id}/incident`, the card's form), and for admins the runs under control
//! (`GET /api/runs`, the Runs page) and switches thrown on them by hand
//! (`POST /api/runs/{run}/pause|resume|terminate`, the Runs page's forms). The rules are the
//! [`Desk`]'s; these handlers translate.

use std::sync::Arc;

use airlock_records::review::control::{IncidentBody, IncidentMarked, RunList, RunSwitchBody, RunSwitched};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::extract::{Admin, CsrfForm, NOT_ADMIN, Session};
use super::ui::{viewer, wants_json};
use super::{ApiError, AppState, refused_status};
use crate::auth::Reviewer;
use crate::desk::control::RunAction;
use crate::desk::refusal::Grounds;
use crate::desk::{Desk, Refusal};
use crate::task::State as Stored;
use crate::ui::pages;
use crate::web::Web;

/// A JSON body of `T`, or `T`'s default for an empty one; `expected` says what is expected.
fn body_or_default<T: DeserializeOwned + Default>(body: &[u8], expected: &str) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("expected {expected} as JSON: {e}")))
}

/// `POST /api/tasks/{id}/incident`: marks a task of the caller's pools, pending or decided, as
/// an incident, with an optional `{"note": …}`; the entry appended to the control log.
pub async fn incident(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<IncidentMarked>, ApiError> {
    let body: IncidentBody = body_or_default(&body, "{\"note\": …}")?;
    Ok(Json(desk.mark_incident(&reviewer, &id, body.note).await?))
}

/// `GET /api/runs`: the runs under control, for an admin.
pub async fn runs(State(desk): State<Arc<Desk>>, _: Admin) -> Result<Json<RunList>, ApiError> {
    Ok(Json(desk.runs()?))
}

/// `POST /api/runs/{run}/pause|resume|terminate`, a route per switch: a pause sends every
/// later call of the run to a person, a resume gives it back to its policies, a terminate ends
/// every sample at its next call and answers the run's pending tasks `terminate`.
pub fn switches() -> Router<AppState> {
    RunAction::ALL.into_iter().fold(Router::new(), |router, action| {
        let handler = move |desk, admin, run, body| switch(desk, admin, run, body, action);
        router.route(&format!("/api/runs/{{run}}/{}", action.as_str()), post(handler))
    })
}

/// Throws `action` on the run as the admin, with an optional [`RunSwitchBody`].
async fn switch(
    State(desk): State<Arc<Desk>>,
    Admin(admin): Admin,
    Path(run): Path<String>,
    body: Bytes,
    action: RunAction,
) -> Result<Json<RunSwitched>, ApiError> {
    let body: RunSwitchBody = body_or_default(&body, "{\"tenant\", \"reason\", \"pool\"}")?;
    Ok(Json(desk.switch_run(&admin, &run, action, body).await?))
}

/// The fields of the card's incident form (its CSRF token is [`CsrfForm`]'s).
#[derive(Debug, Deserialize)]
pub struct IncidentForm {
    /// What the person found.
    #[serde(default)]
    note: Option<String>,
}

/// `POST /ui/tasks/{id}/incident`: the card's incident form; JSON for the script
/// (`Accept: application/json`), else back to the list the task is on, or an error page.
pub async fn incident_form(
    State(desk): State<Arc<Desk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    CsrfForm { session, form }: CsrfForm<IncidentForm>,
) -> Result<Response, ApiError> {
    match desk.mark_incident(&session.reviewer, &id, form.note).await {
        Ok(marked) if wants_json(&headers) => Ok(Json(marked).into_response()),
        Ok(_) => {
            let back = match desk.visible(&session.reviewer, &id).await.map(|task| task.state) {
                Ok(Stored::Pending) => format!("/#task-{id}"),
                _ => "/history".to_owned(),
            };
            Ok(Redirect::to(&back).into_response())
        }
        Err(refusal) if wants_json(&headers) => Err(refusal.into()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

/// `GET /runs`: the Runs page for an admin, `403` for any other reviewer, or back to the
/// login without a session.
pub async fn page(
    State(web): State<Arc<Web>>,
    State(desk): State<Arc<Desk>>,
    session: Option<Session>,
) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    if !session.reviewer.admin {
        return Ok(forbidden());
    }
    let runs = desk.runs()?;
    let pools = session.pools(&web);
    Ok(Html(pages::runs(&viewer(&session, &pools), &runs)).into_response())
}

/// The fields of the Runs page's forms (their CSRF token is [`CsrfForm`]'s).
#[derive(Debug, Deserialize)]
pub struct RunForm {
    /// The run.
    run: String,
    /// `pause`, `resume` or `terminate`.
    action: String,
    /// The run's namespace.
    #[serde(default)]
    tenant: Option<String>,
    /// Why.
    #[serde(default)]
    reason: Option<String>,
    /// For a pause: the pool of people asked.
    #[serde(default)]
    pool: Option<String>,
}

/// `POST /ui/runs`: a switch thrown from the Runs page by an admin; back to the page.
pub async fn switch_form(
    State(desk): State<Arc<Desk>>,
    CsrfForm { session, form }: CsrfForm<RunForm>,
) -> Result<Response, ApiError> {
    if !session.reviewer.admin {
        return Ok(forbidden());
    }
    let Ok(action) = form.action.parse::<RunAction>() else {
        return Err(ApiError::BadRequest(format!("unknown action '{}': pause, resume or terminate", form.action)));
    };
    let body = RunSwitchBody { tenant: form.tenant, reason: form.reason, pool: form.pool };
    match desk.switch_run(&session.reviewer, form.run.trim(), action, body).await {
        Ok(_) => Ok(Redirect::to("/runs").into_response()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

/// The page of a reviewer who is no admin.
fn forbidden() -> Response {
    let status = StatusCode::FORBIDDEN;
    (status, Html(pages::error(status.as_str(), &format!("{NOT_ADMIN}.")))).into_response()
}

/// A refused mark or switch as a short page.
fn refused_page(refusal: &Refusal) -> Response {
    let message = match refusal.grounds() {
        Grounds::NotFound => "No such task among your pools.".to_owned(),
        Grounds::Invalid | Grounds::Conflict => format!("Nothing was recorded: {refusal}."),
        Grounds::Unavailable => format!("That could not be recorded: {refusal}. Try again."),
    };
    let status = refused_status(refusal);
    (status, Html(pages::error(status.as_str(), &message))).into_response()
}

#[cfg(test)]
mod tests;
