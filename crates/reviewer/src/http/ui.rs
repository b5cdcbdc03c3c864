//! The web UI's routes: the pending list (or the login page), filtered and paged, the history,
//! one task's card and the current page's cards for the page's script, decisions from a form
//! or the script, login and logout. Pages need a [`Session`]; every post that changes
//! something is a [`CsrfForm`] (or, for login, [`SameOrigin`]). Sign-ins are limited per
//! client address (the connection's peer): past the limit `/login` answers `429` with
//! `Retry-After`, whatever the token.

use std::net::SocketAddr;
use std::sync::Arc;

use airlock_policy::Decision;
use airlock_records::time::now_ms;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::api::{self, HISTORY_DEFAULT};
use super::extract::{CsrfForm, SameOrigin, Session, form};
use super::{ApiError, refused_status};
use crate::desk::refusal::Grounds;
use crate::desk::{Answer, Arguments, Desk, Refusal};
use crate::triage::{Page, Triage, TriageQuery, UI_PAGE};
use crate::ui::{card, pages, triage};
use crate::web::Web;

/// Who looks at a page: the session's reviewer, with `pools`.
pub(super) fn viewer<'a>(session: &'a Session, pools: &'a [String]) -> pages::Viewer<'a> {
    pages::Viewer { reviewer: &session.reviewer, pools, csrf: &session.csrf, claim_on_open: false }
}

/// `GET /`: a page of the pending list as the query filters it, or the login page without a
/// session.
pub async fn pending(
    State(web): State<Arc<Web>>,
    session: Option<Session>,
    Query(query): Query<TriageQuery>,
) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Html(pages::login(None)).into_response());
    };
    let pools = session.pools(&web);
    let triage = match query.parse() {
        Ok(triage) => triage,
        Err(e) => return Ok((StatusCode::BAD_REQUEST, Html(pages::error("400", &e.to_string()))).into_response()),
    };
    let page = triage_page(&web, &pools, &triage).await?;
    let viewer = pages::Viewer { claim_on_open: web.site.claims.on_open, ..viewer(&session, &pools) };
    Ok(Html(pages::pending(&viewer, &page, &triage, now_ms())).into_response())
}

/// The page of `triage` among `pools`, [`UI_PAGE`] tasks unless it asks for another size.
async fn triage_page(web: &Web, pools: &[String], triage: &Triage) -> Result<Page, ApiError> {
    let limit = triage.limit.unwrap_or(UI_PAGE);
    Ok(web.store.page(pools, &triage.filter, Some(limit), triage.cursor.as_ref(), now_ms()).await?)
}

/// `GET /history`: the history, or back to the login without a session.
pub async fn history(State(web): State<Arc<Web>>, session: Option<Session>) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    let pools = session.pools(&web);
    let tasks = web.store.history(Some(&pools), HISTORY_DEFAULT).await?;
    Ok(Html(pages::history(&viewer(&session, &pools), &tasks)).into_response())
}

/// `GET /ui/tasks/{id}`: one task's card, for the script to insert.
pub async fn card(
    State(desk): State<Arc<Desk>>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Html<String>, ApiError> {
    let task = desk.visible(&session.reviewer, &id).await?;
    Ok(Html(card::card(&task, &session.reviewer, &session.csrf, now_ms())))
}

/// `GET /ui/pending`: the counts, cards and pager of the page the query asks for (as `GET /`
/// shows them), for the script to refresh the page it shows after a change.
pub async fn results(
    State(web): State<Arc<Web>>,
    session: Session,
    Query(query): Query<TriageQuery>,
) -> Result<Html<String>, ApiError> {
    let triage = query.parse().map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let page = triage_page(&web, &session.pools(&web), &triage).await?;
    Ok(Html(triage::results(&page, &triage, &session.reviewer, &session.csrf, now_ms())))
}

/// The fields of a decision from the UI (its CSRF token is [`CsrfForm`]'s).
#[derive(Debug, Deserialize)]
pub struct DecisionForm {
    /// A choice of the task, or `dismiss`.
    decision: String,
    /// Why, if the person said.
    #[serde(default)]
    explanation: Option<String>,
    /// The call's arguments as edited (JSON text), read for a modify only: the form sends its
    /// editor with every button.
    #[serde(default)]
    arguments: Option<String>,
    /// Present when the card's incident box is ticked: the task is marked as an incident
    /// (with the explanation as its note) once decided.
    #[serde(default)]
    incident: Option<String>,
}

/// `POST /ui/tasks/{id}/decision`: the task as JSON for the script (`Accept: application/json`),
/// else back to the list, or an error page.
pub async fn decide(
    State(desk): State<Arc<Desk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    CsrfForm { session, form }: CsrfForm<DecisionForm>,
) -> Result<Response, ApiError> {
    let arguments = match form.arguments {
        Some(text) if form.decision == Decision::Modify.as_str() => Some(Arguments::Text(text)),
        _ => None,
    };
    let answer = Answer { decision: form.decision, explanation: form.explanation, arguments };
    let decided = match form.incident {
        Some(_) => desk.decide_incident(&session.reviewer, &id, answer, None).await,
        None => desk.decide(&session.reviewer, &id, answer).await,
    };
    match decided {
        Ok(task) if wants_json(&headers) => Ok(axum::Json(api::task_view(&task)).into_response()),
        Ok(_) => Ok(Redirect::to("/").into_response()),
        Err(refusal) if wants_json(&headers) => Err(refusal.into()),
        Err(refusal) => Ok(refused_page(&refusal)),
    }
}

/// The page of a decision (or a claim) the desk refused: why, when the person can do
/// something about it.
pub(super) fn refused_page(refusal: &Refusal) -> Response {
    let status = refused_status(refusal);
    let message = match refusal.grounds() {
        Grounds::Invalid => refusal.to_string(),
        Grounds::Conflict if refusal.settled().is_none() => refusal.to_string(),
        Grounds::Conflict => "This task was decided or withdrawn already.".to_owned(),
        Grounds::NotFound => "No such task among your pools.".to_owned(),
        Grounds::Unavailable => "The decision could not be recorded; try again.".to_owned(),
    };
    (status, Html(pages::error(status.as_str(), &message))).into_response()
}

/// Whether a form's request came from the page's script (`Accept: application/json`), which
/// reads the answer as JSON, rather than from a plain form post that expects a page.
pub(super) fn wants_json(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|accept| accept.contains("application/json"))
}

/// The login form.
#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /login`: trades a token for a session cookie, unless the caller's address failed too
/// often lately.
pub async fn login(
    State(web): State<Arc<Web>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    _: SameOrigin,
    body: Bytes,
) -> Result<Response, ApiError> {
    let now = tokio::time::Instant::now();
    if let Err(wait) = web.logins.check(peer.ip(), now) {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let message = format!("Too many failed sign-ins from your address; try again in {seconds} s.");
        let mut response = (StatusCode::TOO_MANY_REQUESTS, Html(pages::login(Some(&message)))).into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return Ok(response);
    }
    let login: LoginForm = form(&body)?;
    let Some(reviewer) = web.reviewers.authenticate(&login.token) else {
        web.logins.failed(peer.ip(), now);
        return Ok((StatusCode::UNAUTHORIZED, Html(pages::login(Some("That token is not valid.")))).into_response());
    };
    web.logins.succeeded(peer.ip());
    let id = web.sessions.open(reviewer).await?;
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(header::SET_COOKIE, web.site.set_session(&id));
    Ok(response)
}

/// `POST /logout`: ends the session (if any) on every process sharing the store, and with it
/// its event streams, and clears the cookie.
pub async fn logout(State(web): State<Arc<Web>>, signed: Option<CsrfForm<IgnoredAny>>) -> Result<Response, ApiError> {
    if let Some(CsrfForm { session, .. }) = signed {
        web.sessions.close(&session.id).await?;
    }
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(header::SET_COOKIE, web.site.clear_session());
    Ok(response)
}
