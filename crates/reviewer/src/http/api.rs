//! The JSON API, for bearers of a reviewer token: the caller's pending tasks, one task, the
//! history, the caller, and decisions (the [`Desk`]'s); and the task view it shows.

use std::sync::Arc;

use airlock_contract::v1;
use airlock_records::review::{
    CallView, DecisionBody, MessageView, ResultView, ReviewerView, ShownContent, ShownView, TaskList, TaskPage,
    TaskState, TaskView, ToolContentView, ToolErrorView, ToolViewView,
};
use airlock_records::time::now_ms;
use airlock_records::view::{KeyView, OriginView, TrailView};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde::Deserialize;

use super::ApiError;
use crate::auth::Reviewer;
use crate::desk::{Answer, Arguments, Desk};
use crate::task::{State as Stored, Task};
use crate::triage::TriageQuery;
use crate::ui;
use crate::web::Web;

/// History entries shown when the caller asks for no number.
pub(super) const HISTORY_DEFAULT: u32 = 100;

/// `GET /api/tasks`: a page of the caller's pending tasks as a [`TriageQuery`] asks (without
/// parameters: all of them, oldest first), with the counts.
pub async fn list(
    State(web): State<Arc<Web>>,
    reviewer: Reviewer,
    Query(query): Query<TriageQuery>,
) -> Result<Json<TaskPage>, ApiError> {
    let triage = query.parse().map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let pools = reviewer.pools_among(&web.pools);
    let page = web.store.page(&pools, &triage.filter, triage.limit, triage.cursor.as_ref(), now_ms()).await?;
    Ok(Json(TaskPage {
        tasks: page.tasks.iter().map(task_view).collect(),
        matching: page.matching,
        counts: page.counts.into_iter().map(|c| (c.pool, c.pending)).collect(),
        more: page.next.is_some(),
        next_cursor: page.next.map(|c| c.to_string()),
    }))
}

/// `GET /api/tasks/{id}`: one task of the caller's pools, in any state.
pub async fn task(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(task_view(&desk.visible(&reviewer, &id).await?)))
}

/// The query of `GET /api/history`.
#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    /// How many entries (1 to 1000; [`HISTORY_DEFAULT`] when absent).
    limit: Option<u32>,
}

/// `GET /api/history`: the caller's decided and withdrawn tasks, newest first.
pub async fn history(
    State(web): State<Arc<Web>>,
    reviewer: Reviewer,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<TaskList>, ApiError> {
    let limit = query.limit.unwrap_or(HISTORY_DEFAULT).clamp(1, 1000);
    let tasks = web.store.history(Some(&reviewer.pools_among(&web.pools)), limit).await?;
    Ok(Json(TaskList { tasks: tasks.iter().map(task_view).collect() }))
}

/// `GET /api/me`: the caller's name and pools.
pub async fn me(State(web): State<Arc<Web>>, reviewer: Reviewer) -> Json<ReviewerView> {
    let pools = reviewer.pools_among(&web.pools);
    Json(ReviewerView { name: reviewer.name, pools })
}

/// `POST /api/tasks/{id}/decision`: answers a task with a [`DecisionBody`] (and marks it as an
/// incident when the body says so); the task as decided.
pub async fn decide(
    State(desk): State<Arc<Desk>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<TaskView>, ApiError> {
    let body: DecisionBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("expected {{\"decision\": …, \"explanation\": …}} as JSON: {e}")))?;
    let answer = Answer {
        decision: body.decision,
        explanation: body.explanation,
        arguments: body.arguments.map(Arguments::Json),
    };
    let decided = if body.incident {
        desk.decide_incident(&reviewer, &id, answer, body.note).await?
    } else {
        desk.decide(&reviewer, &id, answer).await?
    };
    Ok(Json(task_view(&decided)))
}

/// A task as the API shows it.
pub fn task_view(task: &Task) -> TaskView {
    let key = task.request().and_then(|r| r.key.clone()).unwrap_or_default();
    let tool_content = |c: &v1::ToolCallContent| ToolContentView {
        title: c.title.clone(),
        format: c.format.clone(),
        content: c.content.clone(),
    };
    let shown_content = |c: ui::Content| ShownContent { title: c.title, markdown: c.markdown, text: c.text };
    let shown = ui::shown(task.call(), task.view(), task.result());
    let returned = task.result();
    let history = task.history();
    TaskView {
        id: task.id.clone(),
        key: KeyView::from(&key),
        correlation: task.correlation.clone(),
        caller: task.caller(),
        kind: task.kind(),
        pool: task.pool.clone(),
        rerouted_from: task.rerouted_from().map(str::to_owned),
        step: task.step,
        choices: task.choices(),
        message: task.message().to_owned(),
        call: task.call().map(CallView::from),
        view: task.view().map(|v| ToolViewView {
            context: v.context.as_ref().map(tool_content),
            call: v.call.as_ref().map(tool_content),
        }),
        shown: ShownView { context: shown.context.map(shown_content), call: shown_content(shown.call) },
        result: returned.and_then(|r| r.message).map(|m| ResultView {
            text: m.text.clone(),
            error: m.error.as_ref().map(|e| ToolErrorView { kind: e.r#type.clone(), message: e.message.clone() }),
        }),
        output: returned.map(|r| r.output.to_owned()),
        trail: task.trail().iter().map(TrailView::from_wire).collect(),
        policy: task.policy(),
        history: history.messages.iter().map(MessageView::from).collect(),
        history_omitted: history.omitted,
        // A person never sees the run's honest/attack label: it would decide the verdict that
        // calibration then takes as the truth.
        origin: task.origin().map(|origin| OriginView { eval_mode: String::new(), ..OriginView::from(origin) }),
        received_at_unix_ms: task.received_at,
        deadline_unix_ms: task.deadline,
        on_timeout: task.on_timeout(),
        approvals_needed: task.approvals_needed(),
        approvals: task.approvals.clone(),
        claim: task.claim.clone(),
        state: match &task.state {
            Stored::Pending => TaskState::Pending,
            Stored::Decided(v) => TaskState::Decided {
                decision: v.decision,
                explanation: v.explanation.clone(),
                decided_by: v.decided_by.clone(),
                decided_at_unix_ms: v.decided_at,
            },
            Stored::Cancelled { at, reason } => {
                TaskState::Cancelled { reason: reason.clone(), decided_at_unix_ms: *at }
            }
        },
    }
}
