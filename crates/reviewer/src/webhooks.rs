//! Webhooks that page people: `task.created`, `task.decided`, `task.expiring` (a step's
//! `warn_before` before the deadline), `task.expired` and `task.rerouted` (the task moved to
//! the next pool of its step's route), sent to the endpoints configured for a task's pool,
//! signed and retried as [`airlock_webhook`] does.
//!
//! Each webhook is written to the store in the transaction of the change it announces (a task
//! stored by the intake, a decision recorded by a person or a deadline), so a restart loses
//! none and a change made once is announced once. [`crate::webhook_sender`] then leases the
//! webhooks that are due, one attempt per lease, as the outbox leases answers: processes
//! sharing a store send each event once, with the same `webhook-id` on every attempt.
//! Attempts are counted in
//! `airlock_webhook_deliveries_total{outcome}`, and the webhooks still owed in
//! `airlock_webhook_backlog`.
//!
//! An endpoint takes the Standard Webhooks body (`{type, timestamp, data}` with a
//! [`TaskEvent`]) or, with `format: slack`, a Slack-compatible `{"text": "…"}`. The interactive
//! Slack app ([`crate::slack`]) is separate: its messages are rows of the same table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_webhook::{Event, RetryPolicy, WebhookSecret, rfc3339_at};
use serde::{Deserialize, Serialize};

use crate::site::PublicUrl;
use crate::slack::Slack;
use crate::store::NewWebhook;
use crate::task::{DECIDED_BY_REROUTE, DECIDED_BY_TIMEOUT, State, Task};

/// The most characters of a call a Slack message shows.
const CALL_CHARS: usize = 300;

/// What happened to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum EventKind {
    /// A task waits for a person.
    #[serde(rename = "task.created")]
    Created,
    /// A person decided a task.
    #[serde(rename = "task.decided")]
    Decided,
    /// A task's deadline passed: its step's `on_timeout` decided it.
    #[serde(rename = "task.expired")]
    Expired,
    /// A task's deadline is its step's `warn_before` away, and nobody answered it yet.
    #[serde(rename = "task.expiring")]
    Expiring,
    /// Nobody in a task's pool answered within its step's `reroute_after`: it moved to the
    /// next pool of the step's route.
    #[serde(rename = "task.rerouted")]
    Rerouted,
}

impl EventKind {
    /// The event's type, as sent.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Created => "task.created",
            EventKind::Decided => "task.decided",
            EventKind::Expired => "task.expired",
            EventKind::Expiring => "task.expiring",
            EventKind::Rerouted => "task.rerouted",
        }
    }

    const ALL: [EventKind; 5] =
        [EventKind::Created, EventKind::Decided, EventKind::Expired, EventKind::Expiring, EventKind::Rerouted];
}

/// The body an endpoint takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `{type, timestamp, data}`, with a [`TaskEvent`] as `data`.
    #[default]
    Standard,
    /// `{"text": "…"}`, as Slack's incoming webhooks (and compatible chats) take it.
    Slack,
}

/// The pools an endpoint hears of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pools {
    /// Every pool (`"*"`).
    All,
    /// These.
    Only(Vec<String>),
}

impl Pools {
    fn contains(&self, pool: &str) -> bool {
        match self {
            Pools::All => true,
            Pools::Only(pools) => pools.iter().any(|p| p == pool),
        }
    }
}

/// An endpoint that pages people.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Where events are posted.
    pub url: reqwest::Url,
    /// The pools whose tasks it hears of.
    pub pools: Pools,
    /// The key its events are signed with.
    pub secret: WebhookSecret,
    /// The body it takes.
    pub format: Format,
    /// The events it hears of.
    pub events: Vec<EventKind>,
}

/// The endpoints, the Slack app, and how long and how often each event is tried.
#[derive(Debug, Clone, Default)]
pub struct Webhooks {
    /// The endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Backoff and the retry period.
    pub retry: RetryPolicy,
    /// The Slack app that posts the tasks of its pools' channels, if any.
    pub slack: Option<Arc<Slack>>,
}

/// `data` of a standard event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskEvent {
    /// The task's id in this service.
    pub task_id: String,
    /// Its pool.
    pub pool: String,
    /// The pool it moved from, nobody there having answered in time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerouted_from: Option<String>,
    /// The pool it moves to (`task.rerouted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerouted_to: Option<String>,
    /// When it must be answered (unix ms), if ever.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_unix_ms: Option<i64>,
    /// The call's correlation id.
    pub correlation: String,
    /// The call, as `function(arguments)`.
    pub call: String,
    /// The task in the UI, when the service knows its public URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The decision (`task.decided`, `task.expired`; `escalate` for `task.rerouted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Who decided (`timeout` for `task.expired`, `reroute` for `task.rerouted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// A Slack-compatible body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlackMessage {
    /// The message.
    pub text: String,
}

impl TaskEvent {
    /// What `task` (decided or not) says, linking to `public_url`'s UI if known.
    pub fn of(task: &Task, public_url: Option<&PublicUrl>) -> Self {
        let verdict = match &task.state {
            State::Decided(verdict) => Some(verdict),
            State::Pending | State::Cancelled { .. } => None,
        };
        TaskEvent {
            task_id: task.id.clone(),
            pool: task.pool.clone(),
            rerouted_from: task.rerouted_from().map(str::to_owned),
            rerouted_to: verdict.filter(|v| v.decided_by == DECIDED_BY_REROUTE).map(|_| task.human.reroute_to.clone()),
            deadline_unix_ms: task.deadline,
            correlation: task.correlation.clone(),
            call: task.call().map_or_else(String::new, |c| format!("{}({})", c.function, c.arguments_json)),
            url: public_url.map(|url| url.task(&task.id)),
            decision: verdict.map(|v| v.decision.as_str().to_owned()),
            decided_by: verdict.map(|v| v.decided_by.clone()),
            explanation: verdict.map(|v| v.explanation.clone()).filter(|e| !e.is_empty()),
        }
    }

    /// The Slack message for `kind`.
    pub fn slack(&self, kind: EventKind) -> SlackMessage {
        let call = shorten(&self.call, CALL_CHARS);
        let decision = self.decision.as_deref().unwrap_or_default();
        let mut text = match kind {
            EventKind::Created => match &self.rerouted_from {
                Some(from) => format!(
                    "A call waits for a person in pool {}, no one in pool {from} having answered in time: {call}",
                    self.pool
                ),
                None => format!("A call waits for a person in pool {}: {call}", self.pool),
            },
            EventKind::Decided => format!(
                "{} decided {decision} in pool {}: {call}",
                self.decided_by.as_deref().unwrap_or_default(),
                self.pool
            ),
            EventKind::Expired => format!("No one answered in time in pool {}, so {decision}: {call}", self.pool),
            EventKind::Expiring => {
                let at = self.deadline_unix_ms.map_or_else(|| "soon".to_owned(), |at| format!("at {}", rfc3339_at(at)));
                format!("A call in pool {} expires {at} and no one has answered it: {call}", self.pool)
            }
            EventKind::Rerouted => format!(
                "No one answered in time in pool {}, so the call moves to pool {}: {call}",
                self.pool,
                self.rerouted_to.as_deref().unwrap_or_default()
            ),
        };
        if let Some(url) = &self.url {
            text.push_str(&format!("\n<{url}|Open the task>"));
        }
        SlackMessage { text }
    }
}

/// At most `chars` characters of `text`, with `…` when cut.
fn shorten(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

impl Webhooks {
    /// The webhooks announcing `kind` of `task` to the endpoints of its pool that hear of it.
    /// With Slack, the message posted or updated in the pool's channel comes last.
    pub fn announce(&self, kind: EventKind, task: &Task, public_url: Option<&PublicUrl>) -> Vec<NewWebhook> {
        let slack = self.slack.as_ref().and_then(|slack| slack.announce(kind, task, public_url));
        let listening: Vec<&Endpoint> =
            self.endpoints.iter().filter(|e| e.pools.contains(&task.pool) && e.events.contains(&kind)).collect();
        if listening.is_empty() {
            return slack.into_iter().collect();
        }
        let data = TaskEvent::of(task, public_url);
        let timestamp = airlock_webhook::rfc3339_now();
        listening
            .into_iter()
            .map(|endpoint| {
                let body = match endpoint.format {
                    Format::Standard => {
                        let event = Event { kind: kind.as_str(), timestamp: timestamp.clone(), data: &data };
                        serde_json::to_vec(&event)
                    }
                    Format::Slack => serde_json::to_vec(&data.slack(kind)),
                };
                NewWebhook {
                    id: format!("msg_{}", uuid::Uuid::now_v7().simple()),
                    endpoint: endpoint.url.to_string(),
                    body: body.expect("an event serialises"),
                }
            })
            .chain(slack)
            .collect()
    }

    /// Whether nothing is paged: no endpoint, no Slack.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty() && self.slack.is_none()
    }

    /// The event a decision by `decided_by` announces.
    pub fn decision_kind(decided_by: &str) -> EventKind {
        match decided_by {
            DECIDED_BY_TIMEOUT => EventKind::Expired,
            DECIDED_BY_REROUTE => EventKind::Rerouted,
            _ => EventKind::Decided,
        }
    }

    /// The endpoint configured at `url`.
    pub(crate) fn endpoint(&self, url: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.url.as_str() == url)
    }
}

// === config ===

/// One endpoint as written in the webhooks file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointConfig {
    /// Where events are posted (`http://` or `https://`).
    url: String,
    /// The pools it hears of: a list, or `"*"` for all.
    pools: PoolsConfig,
    /// Where its `whsec_…` secret is read.
    secret: SecretConfig,
    /// `standard` (the default) or `slack`.
    #[serde(default)]
    format: Format,
    /// The events it hears of; all of them when missing.
    #[serde(default = "all_events")]
    events: Vec<EventKind>,
}

fn all_events() -> Vec<EventKind> {
    EventKind::ALL.to_vec()
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PoolsConfig {
    Star(String),
    List(Vec<String>),
}

/// Where a secret is read: never inline, so the file naming it may be shared.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum SecretConfig {
    /// A file holding it (relative to the file naming it).
    File(PathBuf),
    /// An environment variable holding it.
    Env(String),
}

impl SecretConfig {
    /// The secret, read from its file under `base` or looked up with `env`; or why not.
    pub(crate) fn read(&self, base: &Path, env: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
        match self {
            SecretConfig::File(file) => std::fs::read_to_string(base.join(file))
                .map_err(|e| format!("cannot read the secret {}: {e}", file.display())),
            SecretConfig::Env(name) => env(name).ok_or_else(|| format!("the secret's variable {name} is not set")),
        }
    }
}

/// Why the webhooks file is not usable.
#[derive(Debug, thiserror::Error)]
pub enum WebhookConfigError {
    /// It cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not a list of endpoints.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and why.
        message: String,
    },
    /// An endpoint is wrong.
    #[error("webhook endpoint {url}: {why}")]
    Endpoint {
        /// Its URL as written.
        url: String,
        /// What is wrong.
        why: String,
    },
}

/// Reads the endpoints from a YAML list of `{url, pools, secret: {file | env}, format,
/// events}`; `env` looks environment variables up.
pub fn load(path: &Path, env: impl Fn(&str) -> Option<String>) -> Result<Vec<Endpoint>, WebhookConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| WebhookConfigError::Read { path: path.to_owned(), source })?;
    let configs: Vec<EndpointConfig> = serde_saphyr::from_str(&text)
        .map_err(|e| WebhookConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut endpoints: Vec<Endpoint> = Vec::with_capacity(configs.len());
    for config in configs {
        let endpoint = resolve(config, base, &env)?;
        if endpoints.iter().any(|e| e.url == endpoint.url) {
            let why = "listed twice".to_owned();
            return Err(WebhookConfigError::Endpoint { url: endpoint.url.to_string(), why });
        }
        endpoints.push(endpoint);
    }
    Ok(endpoints)
}

fn resolve(
    config: EndpointConfig,
    base: &Path,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Endpoint, WebhookConfigError> {
    let fail = |why: String| WebhookConfigError::Endpoint { url: config.url.clone(), why };
    let url = reqwest::Url::parse(&config.url).map_err(|e| fail(format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(fail("use http:// or https://".into()));
    }
    let pools = match config.pools {
        PoolsConfig::Star(star) if star == "*" => Pools::All,
        PoolsConfig::Star(other) => return Err(fail(format!("pools is a list or \"*\", not '{other}'"))),
        PoolsConfig::List(pools) if pools.is_empty() => return Err(fail("pools is empty".into())),
        PoolsConfig::List(pools) => Pools::Only(pools),
    };
    let text = config.secret.read(base, env).map_err(fail)?;
    let secret = text.parse().map_err(|e: airlock_webhook::SecretError| fail(e.to_string()))?;
    if config.events.is_empty() {
        return Err(fail("events is empty".into()));
    }
    Ok(Endpoint { url, pools, secret, format: config.format, events: config.events })
}

#[cfg(test)]
mod tests;
