//! `POST /slack/interactions`: Slack's interactivity endpoint. A button press is decided when
//! the request is Slack's (signed with the app's signing secret, within five minutes of now),
//! used for the first time (the SHA-256 of its timestamp and body is kept in the store), and
//! pressed by a Slack user the Slack file maps to a reviewer of the tokens file; the desk then
//! decides as it does for the UI. Anything else decides nothing.
//!
//! Slack only needs the press acknowledged (`200`); what the person is told (the decision, an
//! approval counted, a refusal, or that they are not mapped) goes to the payload's
//! `response_url` as an ephemeral message. The decided message itself is replaced by
//! `chat.update`, as for any decision.

use std::sync::Arc;
use std::time::Duration;

use airlock_records::time::now_ms;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tracing::{debug, info, warn};

use super::Slack;
use super::blocks::{DECIDE_ACTION, OPEN_ACTION};
use super::signature::{MAX_AGE_SECONDS, SIGNATURE_HEADER, TIMESTAMP_HEADER, payload_id, verify};
use crate::desk::{Answer, Desk};
use crate::logged::Logged;
use crate::web::Web;

/// The route.
pub const PATH: &str = "/slack/interactions";
/// The largest request body read.
pub const BODY_LIMIT: usize = 256 * 1024;
/// How long telling a person through a `response_url` may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The form Slack posts.
#[derive(Debug, Deserialize)]
struct Form {
    payload: String,
}

/// The parts of an interaction payload read.
#[derive(Debug, Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    user: User,
    #[serde(default)]
    actions: Vec<Action>,
    #[serde(default)]
    response_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct User {
    id: String,
}

#[derive(Debug, Deserialize)]
struct Action {
    action_id: String,
    #[serde(default)]
    value: Option<String>,
}

/// Handles one interaction payload.
pub async fn interactions(
    State(desk): State<Arc<Desk>>,
    State(web): State<Arc<Web>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(slack) = desk.webhooks().slack.clone() else {
        return (StatusCode::NOT_FOUND, "Slack is not configured").into_response();
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (timestamp, signature) = (header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER));
    let now = now_ms();
    if let Err(unsigned) = verify(slack.signing_secret.expose(), timestamp, signature, &body, now / 1000) {
        warn!(why = %unsigned, "A Slack interaction was refused.");
        return (StatusCode::UNAUTHORIZED, unsigned.to_string()).into_response();
    }
    let id = payload_id(timestamp.unwrap_or_default(), &body);
    let forget_before = now - 2 * MAX_AGE_SECONDS * 1000;
    match desk.store().use_slack_payload(&id, now, forget_before).await {
        Ok(true) => {}
        Ok(false) => {
            warn!("A Slack interaction was replayed; it decides nothing.");
            return (StatusCode::CONFLICT, "this interaction was used before").into_response();
        }
        Err(e) => {
            warn!(error = %e, "A Slack interaction cannot be checked for replay.");
            return (StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable; try again").into_response();
        }
    }
    let Some(payload) = serde_urlencoded::from_bytes::<Form>(&body)
        .ok()
        .and_then(|form| serde_json::from_str::<Payload>(&form.payload).ok())
    else {
        return (StatusCode::BAD_REQUEST, "not an interaction payload").into_response();
    };
    if let Some(told) = told(&desk, &web, &slack, &payload).await
        && let Some(url) = payload.response_url.filter(|url| url.starts_with("https://") || url.starts_with("http://"))
    {
        tokio::spawn(tell(slack.http().clone(), url, told));
    }
    StatusCode::OK.into_response()
}

/// Tells the person who pressed, privately, through the payload's `response_url`.
async fn tell(http: reqwest::Client, response_url: String, text: String) {
    let message = json!({"response_type": "ephemeral", "replace_original": false, "text": text});
    let sent = http
        .post(&response_url)
        .timeout(RESPONSE_TIMEOUT)
        .header(reqwest::header::CONTENT_TYPE, "application/json; charset=utf-8")
        .body(message.to_string())
        .send()
        .await;
    if let Err(e) = sent {
        debug!(error = %e, "Telling a Slack user failed.");
    }
}

/// Decides what `payload` asks, if it presses a decision's button: what its user is told, or
/// `None` for anything else (the link to the task, other interactions).
async fn told(desk: &Desk, web: &Web, slack: &Slack, payload: &Payload) -> Option<String> {
    let action = payload.actions.first().filter(|_| payload.kind == "block_actions")?;
    let decision = action.action_id.strip_prefix(DECIDE_ACTION);
    let (Some(decision), Some(task_id)) = (decision, action.value.as_deref()) else {
        if action.action_id != OPEN_ACTION {
            debug!(action = %Logged(&action.action_id), "A Slack action that is not Airlock's was ignored.");
        }
        return None;
    };
    let Some(reviewer) = slack.reviewer(&payload.user.id).and_then(|name| web.reviewers.by_name(name)) else {
        info!(user = %Logged(&payload.user.id), task = %Logged(task_id), "An unmapped Slack user pressed a button; nothing decided.");
        return Some(
            "Your Slack user is not mapped to an Airlock reviewer, so nothing was decided. Ask an admin to add you \
             to the Slack file's users."
                .to_owned(),
        );
    };
    let answer = Answer { decision: decision.to_owned(), explanation: None, arguments: None };
    Some(match desk.decide(reviewer, task_id, answer).await {
        Ok(task) if task.is_pending() => {
            let (given, needed) = (task.approvals.len(), task.approvals_needed());
            info!(task = %task.id, reviewer = %reviewer.name, "An approval was given from Slack.");
            format!("Your approval is recorded: {given} of {needed}.")
        }
        Ok(task) => {
            info!(task = %task.id, reviewer = %reviewer.name, %decision, "A task was decided from Slack.");
            format!("You decided {decision}.")
        }
        Err(refusal) => format!("Nothing was decided: {refusal}"),
    })
}
