//! Grouped calls over HTTP: the API's `GET /api/groups` and `POST /api/groups/{group}/decision`,
//! and the UI's groups page, its confirmation page (the count shown before anything is
//! decided) and the confirmed form. A reviewer sees and decides groups of their own pools
//! among the service's only.

use std::sync::Arc;

use airlock_records::review::groups::{GroupDecided, GroupDecisionBody, GroupList, GroupRefusal, GroupView};
use airlock_records::time::now_ms;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::ApiError;
use super::api::task_view;
use super::extract::{CsrfForm, Session};
use super::ui::{refused_page, viewer};
use crate::auth::Reviewer;
use crate::desk::groups::{self, Group};
use crate::desk::{Answer, Desk, Refusal};
use crate::ui::pages;
use crate::web::Web;

/// The groups a page or `GET /api/groups` shows unless it asks for another number.
const GROUPS_SHOWN: u32 = 50;

/// The query of `GET /api/groups`.
#[derive(Debug, Deserialize)]
pub struct GroupsQuery {
    /// How many groups (1 to 200).
    limit: Option<u32>,
}

/// `GET /api/groups`: the groups of two or more identical pending calls in the caller's
/// pools, the largest first, each with its oldest task.
pub async fn list(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Query(query): Query<GroupsQuery>,
) -> Result<Json<GroupList>, ApiError> {
    let limit = query.limit.unwrap_or(GROUPS_SHOWN).clamp(1, 200);
    let groups = desk.groups(&reviewer, limit).await?;
    Ok(Json(GroupList { groups: groups.iter().map(group_view).collect() }))
}

/// `POST /api/groups/{group}/decision`: answers every task of a group with a
/// [`GroupDecisionBody`] whose `count` is the group's count as the caller saw it; `409` with
/// the count now when it changed, and nothing decided.
pub async fn decide(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(group): Path<String>,
    body: Bytes,
) -> Result<Json<GroupDecided>, ApiError> {
    let body: GroupDecisionBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!("expected {{\"decision\": …, \"explanation\": …, \"count\": …}} as JSON: {e}"))
    })?;
    let answer = Answer { decision: body.decision, explanation: body.explanation, arguments: None };
    Ok(Json(decided_view(desk.decide_group(&reviewer, &group, answer, body.count).await?)))
}

/// `GET /groups`: the groups page, or back to the login without a session.
pub async fn page(
    State(desk): State<Arc<Desk>>,
    State(web): State<Arc<Web>>,
    session: Option<Session>,
) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    let pools = session.pools(&web);
    let groups = desk.groups(&session.reviewer, GROUPS_SHOWN).await?;
    Ok(Html(pages::groups(&viewer(&session, &pools), &groups, now_ms())).into_response())
}

/// A group decision as the groups page's form or the confirmation page gives it.
#[derive(Debug, Deserialize)]
pub struct GroupForm {
    /// One of the group's choices.
    decision: String,
    /// Why, if the person said.
    #[serde(default)]
    explanation: Option<String>,
    /// The count the person confirmed (the confirmation page's), or saw (the groups page's).
    count: u64,
}

/// `GET /groups/{group}/confirm`: what the decision will do, the group's count now, and the
/// button that does it.
pub async fn confirm(
    State(desk): State<Arc<Desk>>,
    State(web): State<Arc<Web>>,
    session: Option<Session>,
    Path(group): Path<String>,
    Query(form): Query<GroupForm>,
) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    let pools = session.pools(&web);
    let Some(found) = desk.group(&session.reviewer, &group).await? else {
        return Ok(refused_page(&Refusal::NotFound));
    };
    let confirmation = pages::GroupConfirmation {
        group: &found,
        decision: &form.decision,
        explanation: form.explanation.as_deref().unwrap_or_default(),
        seen: form.count,
    };
    Ok(Html(pages::confirm_group(&viewer(&session, &pools), &confirmation)).into_response())
}

/// `POST /ui/groups/{group}/decision`: the confirmation page's button; a page saying what was
/// decided, or why nothing was.
pub async fn form(
    State(desk): State<Arc<Desk>>,
    State(web): State<Arc<Web>>,
    Path(group): Path<String>,
    CsrfForm { session, form }: CsrfForm<GroupForm>,
) -> Result<Response, ApiError> {
    let answer = Answer { decision: form.decision, explanation: form.explanation, arguments: None };
    match desk.decide_group(&session.reviewer, &group, answer, form.count).await {
        Ok(done) => {
            let pools = session.pools(&web);
            Ok(Html(pages::group_decided(&viewer(&session, &pools), &decided_view(done))).into_response())
        }
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

fn group_view(group: &Group) -> GroupView {
    GroupView {
        group: group.count.group.clone(),
        count: group.count.count,
        oldest_unix_ms: group.count.oldest,
        task: task_view(&group.first),
    }
}

fn decided_view(done: groups::GroupDecided) -> GroupDecided {
    GroupDecided {
        decided: done.decided.into_iter().map(|task| task.id).collect(),
        refused: done
            .refused
            .into_iter()
            .map(|(task, refusal)| GroupRefusal { task, error: refusal.to_string() })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
