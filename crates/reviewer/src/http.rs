//! The HTTP side: the JSON API (bearer tokens), the web UI (session cookie + CSRF token),
//! its live event stream (SSE) and its two static files, in one axum [`Router`] built by
//! [`app`].
//!
//! | route | what |
//! |---|---|
//! | `GET /api/tasks` | the caller's pending tasks |
//! | `GET /api/tasks/{id}` | one task, in any state |
//! | `POST /api/tasks/{id}/decision` | `{"decision", "explanation"}`: answer a task |
//! | `GET /api/history?limit=N` | decided and withdrawn tasks, newest first |
//! | `GET /api/me` | the caller's name and pools |
//! | `GET /` | the pending list (or the login page) |
//! | `GET /history` | the history |
//! | `GET /events` | server-sent events: `added` / `removed` task ids, `resync` |
//! | `GET /ui/tasks/{id}` | one task's card (HTML), for live insertion |
//! | `GET /ui/pending` | the ids on the caller's pending list (JSON), to resynchronise |
//! | `POST /ui/tasks/{id}/decision` | a decision from the UI (form) |
//! | `POST /login`, `POST /logout` | session |
//!
//! Every response carries a strict Content-Security-Policy (scripts and styles from this
//! origin only, nothing inline, no frames), `nosniff`, and no referrer to other sites.

use std::convert::Infallible;
use std::str::FromStr;
use std::sync::Arc;

use airlock_policy::Decision;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::auth::{self, CSRF_HEADER, Reviewer, SESSION_COOKIE, SESSION_TTL, Session};
use airlock_records::time::now_ms;

use crate::shared::{Change, Shared};
use crate::store::{Decided, StoreError};
use crate::task::{DISMISS, DISMISSED_EXPLANATION, State as TaskState, Task, default_explanation};
use crate::ui::{self, pages};

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// The longest explanation kept.
pub const MAX_EXPLANATION: usize = 4000;
/// History entries shown when the caller asks for no number.
const HISTORY_DEFAULT: u32 = 100;

/// The service's HTTP routes over `shared`.
pub fn app(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/tasks", get(api_list))
        .route("/api/tasks/{id}", get(api_task))
        .route("/api/tasks/{id}/decision", post(api_decide))
        .route("/api/history", get(api_history))
        .route("/api/me", get(api_me))
        .route("/", get(ui_pending))
        .route("/history", get(ui_history))
        .route("/events", get(ui_events))
        .route("/ui/pending", get(ui_pending_ids))
        .route("/ui/tasks/{id}", get(ui_card))
        .route("/ui/tasks/{id}/decision", post(ui_decide))
        .route("/login", post(ui_login))
        .route("/logout", post(ui_logout))
        .route("/assets/app.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], pages::CSS) }))
        .route(
            "/assets/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], pages::JS) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(shared)
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // `same-origin`, not `no-referrer`: with the latter browsers send `Origin: null` on the
    // UI's own form posts, which the origin check must refuse.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

// === errors ===

/// Why a request failed, as JSON `{"error": …}` with its status.
#[derive(Debug)]
pub enum ApiError {
    /// No valid token or session.
    Unauthorized,
    /// A UI request without the session's CSRF token or from another origin.
    Forbidden(&'static str),
    /// No such task among the caller's pools.
    NotFound,
    /// The request cannot be read.
    BadRequest(String),
    /// The decision is not one the task offers.
    Unprocessable(String),
    /// The task was decided or withdrawn before.
    Conflict(Value),
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
        let (status, body) = match self {
            ApiError::Unauthorized => {
                let body = json!({"error": "a valid token is required (Authorization: Bearer …)"});
                let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return response;
            }
            ApiError::Forbidden(why) => (StatusCode::FORBIDDEN, json!({"error": why})),
            ApiError::NotFound => (StatusCode::NOT_FOUND, json!({"error": "no such task among your pools"})),
            ApiError::BadRequest(why) => (StatusCode::BAD_REQUEST, json!({"error": why})),
            ApiError::Unprocessable(why) => (StatusCode::UNPROCESSABLE_ENTITY, json!({"error": why})),
            ApiError::Conflict(body) => (StatusCode::CONFLICT, body),
            ApiError::Store(e) => {
                tracing::warn!(error = %e, "Store error while serving a request.");
                (StatusCode::SERVICE_UNAVAILABLE, json!({"error": "the store is unavailable; try again"}))
            }
        };
        (status, axum::Json(body)).into_response()
    }
}

// === the API ===

fn bearer<'a>(shared: &'a Shared, headers: &HeaderMap) -> Result<&'a Reviewer, ApiError> {
    let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or(ApiError::Unauthorized)?;
    let token =
        value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).ok_or(ApiError::Unauthorized)?;
    shared.reviewers.authenticate(token).ok_or(ApiError::Unauthorized)
}

/// The reviewer's pools among those the service serves.
fn pools_of(shared: &Shared, reviewer: &Reviewer) -> Vec<String> {
    reviewer.pools_among(&shared.pools)
}

/// The task `id` if the reviewer may see it.
async fn visible_task(shared: &Shared, reviewer: &Reviewer, id: &str) -> Result<Task, ApiError> {
    match shared.store.task(id).await? {
        Some(task) if shared.serves(&task.pool) && reviewer.sees(&task.pool) => Ok(task),
        _ => Err(ApiError::NotFound),
    }
}

async fn api_list(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let reviewer = bearer(&shared, &headers)?;
    let tasks = shared.store.pending(Some(&pools_of(&shared, reviewer))).await?;
    Ok(axum::Json(json!({"tasks": tasks.iter().map(task_json).collect::<Vec<_>>()})).into_response())
}

async fn api_task(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let reviewer = bearer(&shared, &headers)?;
    Ok(axum::Json(task_json(&visible_task(&shared, reviewer, &id).await?)).into_response())
}

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    limit: Option<u32>,
}

async fn api_history(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(query): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    let reviewer = bearer(&shared, &headers)?;
    let limit = query.limit.unwrap_or(HISTORY_DEFAULT).clamp(1, 1000);
    let tasks = shared.store.history(Some(&pools_of(&shared, reviewer)), limit).await?;
    Ok(axum::Json(json!({"tasks": tasks.iter().map(task_json).collect::<Vec<_>>()})).into_response())
}

async fn api_me(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let reviewer = bearer(&shared, &headers)?;
    Ok(axum::Json(json!({"name": reviewer.name, "pools": pools_of(&shared, reviewer)})).into_response())
}

/// The body of a decision.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// A choice of the task (`approve`, `reject`, …), or `dismiss`.
    pub decision: String,
    /// Why; Inspect's fixed text when absent or blank.
    #[serde(default)]
    pub explanation: Option<String>,
}

async fn api_decide(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let reviewer = bearer(&shared, &headers)?;
    let body: DecisionBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("expected {{\"decision\": …, \"explanation\": …}} as JSON: {e}")))?;
    let task = decide(&shared, reviewer, &id, &body.decision, body.explanation).await?;
    Ok(axum::Json(task_json(&task)).into_response())
}

/// The decision path of the API and the UI: checks, records, and returns the decided task.
async fn decide(
    shared: &Shared,
    reviewer: &Reviewer,
    id: &str,
    decision: &str,
    explanation: Option<String>,
) -> Result<Task, ApiError> {
    let task = visible_task(shared, reviewer, id).await?;
    let choices = task.choices();
    let offered = || choices.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
    let explanation = explanation.map(|e| e.trim().to_owned()).filter(|e| !e.is_empty());
    if explanation.as_ref().is_some_and(|e| e.chars().count() > MAX_EXPLANATION) {
        return Err(ApiError::Unprocessable(format!("the explanation is longer than {MAX_EXPLANATION} characters")));
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
    if !task.is_pending() {
        return Err(conflict(&task));
    }
    match shared.decide(&task, decision, explanation, &reviewer.name).await? {
        Decided::Recorded(_) => shared.store.task(id).await?.ok_or(ApiError::NotFound),
        Decided::NotPending(task) => Err(conflict(&task)),
        Decided::NotFound => Err(ApiError::NotFound),
    }
}

fn conflict(task: &Task) -> ApiError {
    let body = match &task.state {
        TaskState::Decided(v) => json!({
            "error": "already decided",
            "decision": v.decision.as_str(),
            "decided_by": v.decided_by,
            "decided_at_unix_ms": v.decided_at,
        }),
        TaskState::Cancelled { reason, .. } => json!({"error": "withdrawn by the runner", "reason": reason}),
        TaskState::Pending => json!({"error": "the task changed; try again"}),
    };
    ApiError::Conflict(body)
}

/// A task as the API shows it.
pub fn task_json(task: &Task) -> Value {
    let key = task.request().and_then(|r| r.key.clone()).unwrap_or_default();
    let call = task.call().map(|c| {
        let arguments: Value = serde_json::from_str(&c.arguments_json).unwrap_or(Value::Object(Default::default()));
        json!({"id": c.id, "function": c.function, "arguments": arguments})
    });
    let content =
        |c: &airlock_contract::v1::ToolCallContent| json!({"title": c.title, "format": c.format, "content": c.content});
    let view =
        task.view().map(|v| json!({"context": v.context.as_ref().map(content), "call": v.call.as_ref().map(content)}));
    let shown = ui::shown(task.call(), task.view(), task.result());
    let (result, output) = match task.result() {
        Some((message, output)) => (
            message.map(|m| {
                json!({"text": m.text, "error": m.error.as_ref().map(|e| json!({"type": e.r#type, "message": e.message}))})
            }),
            Some(output),
        ),
        None => (None, None),
    };
    let origin = task.origin().map(|o| {
        json!({"run_id": o.run_id, "eval_id": o.eval_id, "task": o.task, "sample_id": o.sample_id,
               "epoch": o.epoch, "model": o.model, "runner_id": o.runner_id})
    });
    let mut out = json!({
        "id": task.id,
        "key": {"run_id": key.run_id, "sample_id": key.sample_id, "epoch": key.epoch, "tool_call_id": key.tool_call_id},
        "correlation": task.correlation,
        "kind": task.kind().to_string(),
        "pool": task.pool,
        "step": task.step,
        "choices": task.choices().iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "message": task.message(),
        "call": call,
        "view": view,
        "shown": {
            "context": shown.context.as_ref().map(|c| json!({"title": c.title, "markdown": c.markdown, "text": c.text})),
            "call": {"title": shown.call.title, "markdown": shown.call.markdown, "text": shown.call.text},
        },
        "result": result,
        "output": output,
        "origin": origin,
        "received_at_unix_ms": task.received_at,
        "deadline_unix_ms": if task.deadline_at > 0 { Some(task.deadline_at) } else { None },
        "on_timeout": task.on_timeout().as_str(),
    });
    let state = match &task.state {
        TaskState::Pending => json!({"state": "pending"}),
        TaskState::Decided(v) => json!({
            "state": "decided", "decision": v.decision.as_str(), "explanation": v.explanation,
            "decided_by": v.decided_by, "decided_at_unix_ms": v.decided_at,
        }),
        TaskState::Cancelled { at, reason } => {
            json!({"state": "cancelled", "reason": reason, "decided_at_unix_ms": at})
        }
    };
    if let (Value::Object(out), Value::Object(state)) = (&mut out, state) {
        out.extend(state);
    }
    out
}

// === the web UI ===

/// The session of a request's cookie, and its reviewer.
fn session<'a>(shared: &'a Shared, headers: &HeaderMap) -> Option<(String, Session, &'a Reviewer)> {
    let cookies = headers.get_all(header::COOKIE);
    let id = cookies.iter().filter_map(|v| v.to_str().ok()).find_map(|h| auth::cookie(h, SESSION_COOKIE))?;
    let session = shared.sessions.get(id)?;
    let reviewer = shared.reviewers.by_name(&session.reviewer)?;
    Some((id.to_owned(), session, reviewer))
}

/// A state-changing UI request must come from this origin (when the browser says where it
/// comes from) and carry the session's CSRF token.
fn check_csrf(headers: &HeaderMap, session: &Session, form_token: Option<&str>) -> Result<(), ApiError> {
    check_origin(headers)?;
    let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).or(form_token).unwrap_or_default();
    if !auth::constant_time_eq(sent.as_bytes(), session.csrf.as_bytes()) {
        return Err(ApiError::Forbidden("missing or wrong CSRF token; reload the page"));
    }
    Ok(())
}

fn check_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !auth::same_origin(origin, host) {
            return Err(ApiError::Forbidden("cross-origin request refused"));
        }
    } else if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return Err(ApiError::Forbidden("cross-site request refused"));
    }
    Ok(())
}

fn viewer<'a>(session: &'a Session, reviewer: &'a Reviewer, pools: &'a [String]) -> pages::Viewer<'a> {
    pages::Viewer { name: &reviewer.name, pools, csrf: &session.csrf }
}

async fn ui_pending(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some((_, session, reviewer)) = session(&shared, &headers) else {
        return Ok(Html(pages::login(None)).into_response());
    };
    let pools = pools_of(&shared, reviewer);
    let tasks = shared.store.pending(Some(&pools)).await?;
    Ok(Html(pages::pending(&viewer(&session, reviewer, &pools), &tasks, now_ms())).into_response())
}

async fn ui_history(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some((_, session, reviewer)) = session(&shared, &headers) else {
        return Ok(Redirect::to("/").into_response());
    };
    let pools = pools_of(&shared, reviewer);
    let tasks = shared.store.history(Some(&pools), HISTORY_DEFAULT).await?;
    Ok(Html(pages::history(&viewer(&session, reviewer, &pools), &tasks)).into_response())
}

async fn ui_card(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (_, session, reviewer) = session(&shared, &headers).ok_or(ApiError::Unauthorized)?;
    let task = visible_task(&shared, reviewer, &id).await?;
    Ok(Html(pages::card(&task, &session.csrf, now_ms())).into_response())
}

async fn ui_pending_ids(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let (_, _, reviewer) = session(&shared, &headers).ok_or(ApiError::Unauthorized)?;
    let ids: Vec<String> = shared
        .store
        .pending_ids()
        .await?
        .into_iter()
        .filter(|(_, pool)| shared.serves(pool) && reviewer.sees(pool))
        .map(|(id, _)| id)
        .collect();
    Ok(axum::Json(ids).into_response())
}

#[derive(Debug, Deserialize)]
struct DecisionForm {
    decision: String,
    #[serde(default)]
    explanation: Option<String>,
    #[serde(default)]
    csrf: Option<String>,
}

async fn ui_decide(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (_, session, reviewer) = session(&shared, &headers).ok_or(ApiError::Unauthorized)?;
    let form: DecisionForm = form(&body)?;
    check_csrf(&headers, &session, form.csrf.as_deref())?;
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/json"));
    match decide(&shared, reviewer, &id, &form.decision, form.explanation).await {
        Ok(task) if wants_json => Ok(axum::Json(task_json(&task)).into_response()),
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(e) if wants_json => Err(e),
        Err(e) => {
            let status = e.into_response().status();
            let message = match status {
                StatusCode::CONFLICT => "This task was decided or withdrawn already.",
                StatusCode::UNPROCESSABLE_ENTITY => "That is not one of this task's choices.",
                StatusCode::NOT_FOUND => "No such task among your pools.",
                _ => "The decision could not be recorded; try again.",
            };
            Ok((status, Html(pages::error(status.as_str(), message))).into_response())
        }
    }
}

fn form<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_urlencoded::from_bytes(body).map_err(|e| ApiError::BadRequest(format!("cannot read the form: {e}")))
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
}

async fn ui_login(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    check_origin(&headers)?;
    let login: LoginForm = form(&body)?;
    let Some(reviewer) = shared.reviewers.authenticate(&login.token) else {
        return Ok((StatusCode::UNAUTHORIZED, Html(pages::login(Some("That token is not valid.")))).into_response());
    };
    let (id, _) = shared.sessions.open(&reviewer.name);
    let cookie = format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_TTL.as_secs());
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).expect("a cookie is ASCII"));
    Ok(response)
}

#[derive(Debug, Deserialize)]
struct LogoutForm {
    #[serde(default)]
    csrf: Option<String>,
}

async fn ui_logout(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    if let Some((id, session, _)) = session(&shared, &headers) {
        let logout: LogoutForm = form(&body)?;
        check_csrf(&headers, &session, logout.csrf.as_deref())?;
        shared.sessions.close(&id);
    }
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("airlock_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    Ok(response)
}

async fn ui_events(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let (_, _, reviewer) = session(&shared, &headers).ok_or(ApiError::Unauthorized)?;
    let pools = pools_of(&shared, reviewer);
    let receiver = shared.changes.subscribe();
    let stop = shared.stop.clone();
    let stream = futures_util::stream::unfold((receiver, stop, pools), |(mut receiver, stop, pools)| async move {
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return None,
                change = receiver.recv() => match change {
                    Ok(change) if pools.iter().any(|p| p == change.pool()) => match change {
                        Change::Added { id, .. } => Event::default().event("added").data(id),
                        Change::Removed { id, .. } => Event::default().event("removed").data(id),
                    },
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => Event::default().event("resync").data("lagged"),
                    Err(RecvError::Closed) => return None,
                },
            };
            return Some((Ok::<_, Infallible>(event), (receiver, stop, pools)));
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

#[cfg(test)]
mod tests;
