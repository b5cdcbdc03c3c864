//! The messages owed to Slack, as rows of the webhooks table ([`announce`]), and the Web API
//! calls that send them ([`deliver`]): `chat.postMessage` when a task arrives, `chat.update`
//! once it is decided. A row's id is derived from its task's, so each task has one of each.
//!
//! An update waits for its post: without the message's `ts` it is retried while the post is
//! owed, and given up once the post is over (nothing was posted, or it was given up).
//!
//! The Web API answers `200` with `{"ok": true, …}` or `{"ok": false, "error": …}`; rate
//! limits (`429`), server errors, timeouts and Slack's transient errors are retried, any other
//! error given up (a wrong token or channel does not get better by itself).

use std::time::Duration;

use airlock_records::time::now_ms;
use airlock_webhook::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{debug, info, warn};

use super::{Slack, blocks};
use crate::desk::Desk;
use crate::site::PublicUrl;
use crate::store::{NewWebhook, OwedWebhook, RowState, SlackPost};
use crate::task::{State, Task};
use crate::webhooks::EventKind;

/// The endpoint of a row owed to Slack's `chat.postMessage`.
pub const POST_MESSAGE: &str = "slack:chat.postMessage";
/// The endpoint of a row owed to Slack's `chat.update`.
pub const UPDATE: &str = "slack:chat.update";

/// Errors of the Web API worth another attempt.
const TRANSIENT: [&str; 5] = ["ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"];

/// A row owed to Slack, as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Owed {
    /// The task it is about.
    task_id: String,
    /// The arguments of the call; `chat.update`'s get the channel and `ts` when sent.
    message: Value,
}

/// What the Web API answered.
#[derive(Debug, Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    ts: Option<String>,
}

/// Whether the row addressed to `endpoint` is owed to Slack rather than to a webhook endpoint.
pub fn owes(endpoint: &str) -> bool {
    endpoint == POST_MESSAGE || endpoint == UPDATE
}

impl Slack {
    /// The row announcing `kind` of `task`, when its pool has a channel: a post for a task
    /// created, an update for one decided, expired or moved to another pool.
    pub fn announce(&self, kind: EventKind, task: &Task, public_url: Option<&PublicUrl>) -> Option<NewWebhook> {
        let channel = self.channel(&task.pool)?;
        let (id, endpoint, message) = match kind {
            EventKind::Created => {
                let mut message = blocks::pending(task, public_url);
                message["channel"] = Value::from(channel);
                (post_id(&task.id), POST_MESSAGE, message)
            }
            // A task that moved to another pool leaves this one's channel as a decided one does.
            EventKind::Decided | EventKind::Expired | EventKind::Rerouted => {
                let State::Decided(verdict) = &task.state else { return None };
                (format!("slack_update_{}", task.id), UPDATE, blocks::decided(task, verdict, public_url))
            }
            // Warned of through the webhook endpoints; the channel's message stays as it is.
            EventKind::Expiring => return None,
        };
        let body = serde_json::to_vec(&Owed { task_id: task.id.clone(), message }).expect("a message serialises");
        Some(NewWebhook { id, endpoint: endpoint.to_owned(), body })
    }
}

/// The id of the row posting `task_id`'s message.
fn post_id(task_id: &str) -> String {
    format!("slack_post_{task_id}")
}

/// One attempt of `webhook`, a row owed to Slack, within `timeout`.
pub async fn deliver(desk: &Desk, webhook: &OwedWebhook, timeout: Duration) -> Outcome {
    let Some(slack) = &desk.webhooks().slack else {
        warn!(webhook_id = %webhook.id, "Slack message given up: Slack is no longer configured.");
        return Outcome::GivenUp;
    };
    let Ok(Owed { task_id, mut message }) = serde_json::from_slice::<Owed>(&webhook.body) else {
        warn!(webhook_id = %webhook.id, "Slack message given up: its row cannot be read.");
        return Outcome::GivenUp;
    };
    let store = desk.store();
    if webhook.endpoint == UPDATE {
        match store.slack_message(&task_id).await {
            Ok(Some(SlackPost { channel, ts })) => {
                message["channel"] = Value::from(channel);
                message["ts"] = Value::from(ts);
            }
            Ok(None) => {
                return match store.webhook_state(&post_id(&task_id)).await {
                    Ok(RowState::Owed) | Err(_) => Outcome::Retried,
                    Ok(RowState::Over | RowState::Missing) => {
                        debug!(task = %task_id, "No Slack message to update: none was posted.");
                        Outcome::GivenUp
                    }
                };
            }
            Err(e) => {
                warn!(task = %task_id, error = %e, "Reading the task's Slack message failed; retried.");
                return Outcome::Retried;
            }
        }
    }
    let method = webhook.endpoint.trim_start_matches("slack:");
    let answer = match call(slack, method, &message, timeout).await {
        Ok(answer) => answer,
        Err(outcome) => return outcome,
    };
    if webhook.endpoint == POST_MESSAGE {
        let (Some(channel), Some(ts)) = (answer.channel, answer.ts) else {
            warn!(task = %task_id, "Slack posted the message but named no channel or ts; it cannot be updated.");
            return Outcome::Delivered;
        };
        if let Err(e) = store.slack_posted(&task_id, &SlackPost { channel, ts }, now_ms()).await {
            warn!(task = %task_id, error = %e, "The Slack message is posted but not kept; it is posted again.");
            return Outcome::Retried;
        }
    }
    info!(task = %task_id, method, "Slack message sent.");
    Outcome::Delivered
}

/// Calls the Web API's `method` with `arguments` (JSON) as the bot: its answer when `ok`, or
/// what to do next.
async fn call(slack: &Slack, method: &str, arguments: &Value, timeout: Duration) -> Result<Answer, Outcome> {
    let sent = slack
        .http()
        .post(format!("{}/{method}", slack.api_url))
        .timeout(timeout)
        .bearer_auth(slack.bot_token.expose())
        .header(reqwest::header::CONTENT_TYPE, "application/json; charset=utf-8")
        .body(serde_json::to_vec(arguments).expect("arguments serialise"))
        .send()
        .await;
    let response = match sent {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => {
            debug!(method, status = %response.status(), "Slack refused a call; retried.");
            return Err(Outcome::Retried);
        }
        Err(e) => {
            debug!(method, error = %e, "Slack was not reached; retried.");
            return Err(Outcome::Retried);
        }
    };
    let read = response.bytes().await.map_err(|e| e.to_string());
    match read.and_then(|body| serde_json::from_slice::<Answer>(&body).map_err(|e| e.to_string())) {
        Ok(answer) if answer.ok => Ok(answer),
        Ok(Answer { error, .. }) => {
            let error = error.unwrap_or_default();
            if TRANSIENT.contains(&error.as_str()) {
                debug!(method, %error, "Slack failed a call; retried.");
                Err(Outcome::Retried)
            } else {
                warn!(method, %error, "Slack refused a call; given up.");
                Err(Outcome::GivenUp)
            }
        }
        Err(e) => {
            debug!(method, error = %e, "Slack's answer cannot be read; retried.");
            Err(Outcome::Retried)
        }
    }
}
