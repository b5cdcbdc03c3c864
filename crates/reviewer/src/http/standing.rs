//! Standing decisions over HTTP: the API's `GET /api/standing`, `POST /api/standing` and
//! `POST /api/standing/{id}/revoke`, and the UI's standing page, its revoke buttons and the
//! card's "every identical call" form. A reviewer sees, makes and revokes standing decisions
//! of their own pools among the service's only.

use std::str::FromStr;
use std::sync::Arc;

use airlock_policy::Decision;
use airlock_policy::glob::WholeGlob;
use airlock_records::review::standing::{
    Scope, ScopeKind, StandingBody, StandingCreated, StandingDecision, StandingList,
};
use airlock_records::time::now_ms;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::ApiError;
use super::api::{decide_as, visible_task};
use super::extract::{CsrfForm, Session};
use super::ui::wants_json;
use crate::auth::Reviewer;
use crate::shared::Shared;
use crate::standing::{self, MAX_PATTERN, MAX_SECONDS, standing_may_decide};
use crate::store::NewStanding;
use crate::task::{State as Stored, Task};
use crate::ui::pages;

/// `GET /api/standing`: the active standing decisions of the caller's pools, newest first.
pub async fn list(State(shared): State<Arc<Shared>>, reviewer: Reviewer) -> Result<Json<StandingList>, ApiError> {
    let pools = reviewer.pools_among(&shared.pools);
    Ok(Json(StandingList { standing: shared.store.active_standing(&pools, now_ms()).await? }))
}

/// `POST /api/standing`: answers a task with a [`StandingBody`] and makes the answer stand for
/// every identical call; `201` with the standing decision and the other tasks it decided.
pub async fn create(
    State(shared): State<Arc<Shared>>,
    reviewer: Reviewer,
    body: Bytes,
) -> Result<(StatusCode, Json<StandingCreated>), ApiError> {
    let body: StandingBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "expected {{\"task\", \"decision\", \"explanation\", \"scope\", \"seconds\", \"pattern\"}} as JSON: {e}"
        ))
    })?;
    Ok((StatusCode::CREATED, Json(stand(&shared, &reviewer, body).await?)))
}

/// `POST /api/standing/{id}/revoke`: revokes a standing decision of the caller's pools; it as
/// revoked. It stops applying at once, on every process sharing the store.
pub async fn revoke(
    State(shared): State<Arc<Shared>>,
    reviewer: Reviewer,
    Path(id): Path<i64>,
) -> Result<Json<StandingDecision>, ApiError> {
    Ok(Json(revoke_as(&shared, &reviewer, id).await?))
}

/// The checks and steps of a standing decision, for the API and the UI: the standing
/// parameters are checked first, then the task is decided as the reviewer's own decision,
/// then the standing decision is stored and applied to the pending tasks it covers.
async fn stand(shared: &Shared, reviewer: &Reviewer, body: StandingBody) -> Result<StandingCreated, ApiError> {
    let task = visible_task(shared, reviewer, &body.task).await?;
    let unprocessable = |why: &str| ApiError::Unprocessable(why.to_owned());
    let decision = Decision::from_str(&body.decision)
        .ok()
        .filter(|d| *d != Decision::Modify && task.choices().contains(d))
        .ok_or_else(|| unprocessable("a standing decision answers with one of the task's choices (not modify)"))?;
    if !standing_may_decide(&task, decision) {
        return Err(unprocessable("this task's step needs several approvals: a standing decision cannot approve it"));
    }
    if !(1..=MAX_SECONDS).contains(&body.seconds) {
        return Err(ApiError::Unprocessable(format!("seconds: from 1 to {MAX_SECONDS}")));
    }
    let scope = scope_of(&task, body.scope)?;
    let text = standing::call_text(&task).ok_or_else(|| unprocessable("this task's call cannot be read"))?;
    let pattern = match body.pattern.filter(|p| !p.is_empty()) {
        Some(pattern) => pattern,
        None => standing::exact_pattern(&task).unwrap_or_default(),
    };
    if pattern.chars().count() > MAX_PATTERN {
        return Err(ApiError::Unprocessable(format!("the pattern is longer than {MAX_PATTERN} characters")));
    }
    if pattern.contains('\0') {
        return Err(unprocessable("the pattern holds a NUL character, which the store cannot keep"));
    }
    let glob = WholeGlob::new(&pattern).map_err(|e| ApiError::Unprocessable(e.to_string()))?;
    if !glob.is_match(&text) {
        return Err(unprocessable("the pattern does not match this task's own call"));
    }
    let decided = decide_as(shared, reviewer, &task.id, decision.as_str(), body.explanation, None).await?;
    let Stored::Decided(verdict) = &decided.state else { return Err(ApiError::NotFound) };
    let now = now_ms();
    let new = NewStanding {
        author: reviewer.name.clone(),
        pool: task.pool.clone(),
        kind: task.kind(),
        step: task.step,
        scope,
        caller: task.caller(),
        policy: task.policy(),
        pattern,
        decision,
        explanation: verdict.explanation.clone(),
        created_at: now,
        expires_at: now + body.seconds as i64 * 1000,
    };
    let standing = shared.store.add_standing(&new).await?;
    let decided = standing::apply_to_pending(shared, &standing, now).await?;
    Ok(StandingCreated { standing, decided })
}

/// The task's sample, run or pool; a sample or run the task's call key leaves empty is refused
/// (it would cover every call without one).
fn scope_of(task: &Task, kind: ScopeKind) -> Result<Scope, ApiError> {
    let key = task.request().and_then(|r| r.key.clone()).unwrap_or_default();
    let missing = |what: &str| ApiError::Unprocessable(format!("this task's call names no {what}"));
    match kind {
        ScopeKind::Pool => Ok(Scope::Pool),
        _ if key.run_id.is_empty() => Err(missing("run")),
        ScopeKind::Run => Ok(Scope::Run { run_id: key.run_id }),
        ScopeKind::Sample if key.sample_id.is_empty() => Err(missing("sample")),
        ScopeKind::Sample => Ok(Scope::Sample { run_id: key.run_id, sample_id: key.sample_id }),
    }
}

/// Revokes standing decision `id` as `reviewer`, if it is of their pools and not revoked yet.
async fn revoke_as(shared: &Shared, reviewer: &Reviewer, id: i64) -> Result<StandingDecision, ApiError> {
    let not_found = || ApiError::NoSuch("no such standing decision among your pools");
    let standing = shared.store.standing_decision(id).await?.ok_or_else(not_found)?;
    if !(shared.serves(&standing.pool) && reviewer.sees(&standing.pool)) {
        return Err(not_found());
    }
    if !shared.store.revoke_standing(id, &reviewer.name, now_ms()).await? {
        return Err(ApiError::Conflict(airlock_records::review::ErrorView {
            error: "revoked already".into(),
            settled: None,
        }));
    }
    shared.store.standing_decision(id).await?.ok_or_else(not_found)
}

/// `GET /standing`: the standing page, or back to the login without a session.
pub async fn page(State(shared): State<Arc<Shared>>, session: Option<Session>) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    let pools = session.pools(&shared);
    let standing = shared.store.active_standing(&pools, now_ms()).await?;
    let viewer = pages::Viewer { name: &session.reviewer.name, pools: &pools, csrf: &session.csrf };
    Ok(Html(pages::standing(&viewer, &standing)).into_response())
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
    State(shared): State<Arc<Shared>>,
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
    match stand(&shared, &session.reviewer, body).await {
        Ok(created) if wants_json => Ok((StatusCode::CREATED, Json(created)).into_response()),
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(e) if wants_json => Err(e),
        Err(e) => Ok(error_page(e)),
    }
}

/// `POST /ui/standing/{id}/revoke`: the standing page's Revoke button; back to the page.
pub async fn revoke_form(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<i64>,
    CsrfForm { session, .. }: CsrfForm<IgnoredAny>,
) -> Result<Response, ApiError> {
    match revoke_as(&shared, &session.reviewer, id).await {
        Ok(_) => Ok(Redirect::to("/standing").into_response()),
        Err(e) => Ok(error_page(e)),
    }
}

/// A refusal as a short page.
fn error_page(error: ApiError) -> Response {
    let message = match &error {
        ApiError::Unprocessable(why) => format!("The standing decision was not made: {why}."),
        ApiError::NoSuch(what) => format!("{what}."),
        ApiError::NotFound => "No such task among your pools.".to_owned(),
        ApiError::Conflict(view) => format!("Nothing changed: {}.", view.error),
        _ => "That could not be done; try again.".to_owned(),
    };
    let status = error.into_response().status();
    (status, Html(pages::error(status.as_str(), &message))).into_response()
}

#[cfg(test)]
mod tests;
