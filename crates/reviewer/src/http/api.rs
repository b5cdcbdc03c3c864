//! The JSON API, for bearers of a reviewer token: the caller's pending tasks, one task, the
//! history, the caller, and decisions; the task view it shows; and the decision path the web
//! UI's decisions take too.

use std::str::FromStr;
use std::sync::Arc;

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_records::review::{
    CallView, DecisionBody, ErrorView, MessageView, ResultView, ReviewerView, Settled, ShownContent, ShownView,
    TaskList, TaskPage, TaskState, TaskView, ToolContentView, ToolErrorView, ToolViewView,
};
use airlock_records::time::now_ms;
use airlock_records::view::{KeyView, OriginView, TrailView};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde::Deserialize;

use super::ApiError;
use crate::auth::Reviewer;
use crate::modify::modified_call;
use crate::shared::Shared;
use crate::store::{Approved, Decided};
use crate::task::{DISMISS, DISMISSED_EXPLANATION, State as Stored, Task, default_explanation};
use crate::triage::TriageQuery;
use crate::ui;

/// The longest explanation kept.
pub const MAX_EXPLANATION: usize = 4000;
/// History entries shown when the caller asks for no number.
pub(super) const HISTORY_DEFAULT: u32 = 100;

/// `GET /api/tasks`: a page of the caller's pending tasks as a [`TriageQuery`] asks (without
/// parameters: all of them, oldest first), with the counts.
pub async fn list(
    State(shared): State<Arc<Shared>>,
    reviewer: Reviewer,
    Query(query): Query<TriageQuery>,
) -> Result<Json<TaskPage>, ApiError> {
    let triage = query.parse().map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let pools = reviewer.pools_among(&shared.pools);
    let page = shared.store.page(&pools, &triage.filter, triage.limit, triage.cursor.as_ref(), now_ms()).await?;
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
    State(shared): State<Arc<Shared>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(task_view(&visible_task(&shared, &reviewer, &id).await?)))
}

/// The query of `GET /api/history`.
#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    /// How many entries (1 to 1000; [`HISTORY_DEFAULT`] when absent).
    limit: Option<u32>,
}

/// `GET /api/history`: the caller's decided and withdrawn tasks, newest first.
pub async fn history(
    State(shared): State<Arc<Shared>>,
    reviewer: Reviewer,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<TaskList>, ApiError> {
    let limit = query.limit.unwrap_or(HISTORY_DEFAULT).clamp(1, 1000);
    let tasks = shared.store.history(Some(&reviewer.pools_among(&shared.pools)), limit).await?;
    Ok(Json(TaskList { tasks: tasks.iter().map(task_view).collect() }))
}

/// `GET /api/me`: the caller's name and pools.
pub async fn me(State(shared): State<Arc<Shared>>, reviewer: Reviewer) -> Json<ReviewerView> {
    let pools = reviewer.pools_among(&shared.pools);
    Json(ReviewerView { name: reviewer.name, pools })
}

/// `POST /api/tasks/{id}/decision`: answers a task with a [`DecisionBody`]; the task as decided.
pub async fn decide(
    State(shared): State<Arc<Shared>>,
    reviewer: Reviewer,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<TaskView>, ApiError> {
    let body: DecisionBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("expected {{\"decision\": …, \"explanation\": …}} as JSON: {e}")))?;
    let task = decide_as(&shared, &reviewer, &id, &body.decision, body.explanation, body.arguments).await?;
    Ok(Json(task_view(&task)))
}

/// The task `id` if the reviewer may see it.
pub(super) async fn visible_task(shared: &Shared, reviewer: &Reviewer, id: &str) -> Result<Task, ApiError> {
    match shared.store.task(id).await? {
        Some(task) if shared.serves(&task.pool) && reviewer.sees(&task.pool) => Ok(task),
        _ => Err(ApiError::NotFound),
    }
}

/// The decision path of the API and the UI: checks `decision` (a choice of the task, or
/// `dismiss`), the explanation and a modify's `arguments`, records them as `reviewer`'s, and
/// returns the decided task.
pub(super) async fn decide_as(
    shared: &Shared,
    reviewer: &Reviewer,
    id: &str,
    decision: &str,
    explanation: Option<String>,
    arguments: Option<serde_json::Value>,
) -> Result<Task, ApiError> {
    let task = visible_task(shared, reviewer, id).await?;
    let choices = task.choices();
    let offered = || choices.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
    let explanation = explanation.map(|e| e.trim().to_owned()).filter(|e| !e.is_empty());
    if explanation.as_ref().is_some_and(|e| e.chars().count() > MAX_EXPLANATION) {
        return Err(ApiError::Unprocessable(format!("the explanation is longer than {MAX_EXPLANATION} characters")));
    }
    if explanation.as_ref().is_some_and(|e| e.contains('\0')) {
        return Err(ApiError::Unprocessable(
            "the explanation holds a NUL character, which the store cannot keep".into(),
        ));
    }
    let (decision, explanation) = if decision == DISMISS {
        let text = match explanation {
            Some(note) => format!("{DISMISSED_EXPLANATION} ({note})"),
            None => DISMISSED_EXPLANATION.to_owned(),
        };
        (Decision::Terminate, text)
    } else {
        let parsed = Decision::from_str(decision).map_err(|_| {
            ApiError::Unprocessable(format!("unknown decision '{decision}': this task offers {}", offered()))
        })?;
        if !choices.contains(&parsed) {
            return Err(ApiError::Unprocessable(format!(
                "'{parsed}' is not one of this task's choices ({})",
                offered()
            )));
        }
        (parsed, explanation.unwrap_or_else(|| default_explanation(task.kind(), parsed).to_owned()))
    };
    let modified = modified_call(&task, decision, arguments).map_err(|e| ApiError::Unprocessable(e.to_string()))?;
    if !task.is_pending() {
        return Err(conflict(&task));
    }
    // On a step that needs several approvals, a modify is one approval of the modified call.
    if (decision == task.approving() || modified.is_some()) && task.approvals_needed() > 1 {
        return approve_as(shared, reviewer, &task, explanation, modified).await;
    }
    let decided = match modified {
        Some(call) => shared.modify(&task, call, explanation, &reviewer.name).await?,
        None => shared.decide(&task, decision, explanation, &reviewer.name).await?,
    };
    match decided {
        Decided::Recorded(_) => shared.store.task(id).await?.ok_or(ApiError::NotFound),
        Decided::NotPending(task) => Err(conflict(&task)),
        Decided::NotFound => Err(ApiError::NotFound),
    }
}

/// One approval of a task that needs several, of the `modified` call of a modify or else of
/// the call as asked: the task as it stands after it (decided by the one that completes the
/// count); a second approval by the same reviewer is a conflict.
async fn approve_as(
    shared: &Shared,
    reviewer: &Reviewer,
    task: &Task,
    explanation: String,
    modified: Option<v1::ToolCall>,
) -> Result<Task, ApiError> {
    match shared.approve(task, explanation, &reviewer.name, modified).await? {
        Approved::Counted(task) => Ok(*task),
        Approved::Decided(_) => shared.store.task(&task.id).await?.ok_or(ApiError::NotFound),
        Approved::Again(task) => Err(ApiError::Conflict(ErrorView {
            error: format!(
                "you approved this task already; it needs {} approvals from distinct reviewers ({} so far)",
                task.approvals_needed(),
                task.approvals.len()
            ),
            settled: None,
        })),
        Approved::NotPending(task) => Err(conflict(&task)),
        Approved::NotFound => Err(ApiError::NotFound),
    }
}

/// The refusal of a decision on a task that is no longer pending.
fn conflict(task: &Task) -> ApiError {
    let (error, settled) = match &task.state {
        Stored::Decided(v) => (
            "already decided",
            Some(Settled::Decided {
                decision: v.decision,
                decided_by: v.decided_by.clone(),
                decided_at_unix_ms: v.decided_at,
            }),
        ),
        Stored::Cancelled { reason, .. } => {
            ("withdrawn by the runner", Some(Settled::Withdrawn { reason: reason.clone() }))
        }
        Stored::Pending => ("the task changed; try again", None),
    };
    ApiError::Conflict(ErrorView { error: error.to_owned(), settled })
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
        origin: task.origin().map(OriginView::from),
        received_at_unix_ms: task.received_at,
        deadline_unix_ms: task.deadline,
        on_timeout: task.on_timeout(),
        approvals_needed: task.approvals_needed(),
        approvals: task.approvals.clone(),
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
