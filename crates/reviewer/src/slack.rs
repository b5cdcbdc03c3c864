//! Slack, interactively: each new task of a pool with a channel is posted there with the Web
//! API's `chat.postMessage` (Block Kit: the call as Inspect renders it, why it is here, a button
//! per choice of its step, a link to the task), and the message is replaced with
//! `chat.update` once the task is decided, naming who decided and how.
//!
//! Both calls are rows of the webhooks table, written in the transaction of the change they
//! announce and sent by [`crate::webhook_sender`] as it sends webhooks: leased per attempt,
//! retried with the same backoff until the retry period ends, so a restart loses none. The
//! update waits for its post (it needs the message's `ts`, kept in the store once posted).
//!
//! A button press reaches `POST /slack/interactions` as Slack sends it (form-encoded
//! `payload=`), signed with the app's signing secret: the signature (`X-Slack-Signature`, `v0`
//! over the timestamp and the body) is checked in constant time, a timestamp more than five
//! minutes away from now is refused, and each signed request is used once, across processes
//! and restarts. The Slack user is mapped to a reviewer of the tokens file by the Slack file;
//! the answer is then the desk's like any other, so the reviewer's pools, two-person approval
//! and standing decisions apply. An unmapped user is told so, and nothing is decided.
//!
//! Layout:
//! - [`Slack`] (here): the Slack file read: the Web API's URL, the bot token, the signing
//!   secret, a channel per pool, a reviewer per Slack user.
//! - [`signature`]: requests Slack signs, checked.
//! - [`blocks`]: a task's message in Block Kit, pending or decided; text escaped for mrkdwn.
//! - [`api`]: the messages owed as webhook rows, and the Web API calls that send them.
//! - [`interactions`]: the interactivity endpoint: a button press checked, mapped, decided.

pub mod api;
pub mod blocks;
pub mod interactions;
pub mod signature;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::auth::Reviewers;
use crate::webhooks::SecretConfig;

/// Slack's Web API, unless the Slack file says otherwise.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

/// A secret, never shown in logs or `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Hidden(String);

impl Hidden {
    /// `text`, hidden.
    pub fn new(text: impl Into<String>) -> Self {
        Hidden(text.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hidden(…)")
    }
}

/// The Slack app the service posts with and hears button presses from.
#[derive(Debug, Clone)]
pub struct Slack {
    /// The Web API's base URL, without a trailing `/` (`https://slack.com/api`).
    pub api_url: String,
    /// The bot token (`xoxb-…`), with the `chat:write` scope.
    pub bot_token: Hidden,
    /// The app's signing secret, which button presses are signed with.
    pub signing_secret: Hidden,
    /// The channel id each pool's tasks are posted to; pools without one are not posted.
    pub channels: BTreeMap<String, String>,
    /// The reviewer (a name of the tokens file) each Slack user id decides as.
    pub users: BTreeMap<String, String>,
    /// The client of the Web API and of the payloads' `response_url`.
    http: reqwest::Client,
}

/// Why the Slack file is not usable.
#[derive(Debug, thiserror::Error)]
pub enum SlackConfigError {
    /// It cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It says something wrong.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and why.
        message: String,
    },
}

/// The Slack file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlackFile {
    #[serde(default = "default_api_url")]
    api_url: String,
    bot_token: SecretConfig,
    signing_secret: SecretConfig,
    channels: BTreeMap<String, String>,
    #[serde(default)]
    users: BTreeMap<String, String>,
}

fn default_api_url() -> String {
    DEFAULT_API_URL.to_owned()
}

impl Slack {
    /// An app posting through the Web API at `api_url` with `bot_token`, hearing presses
    /// signed with `signing_secret`, for `channels` (pool → channel id) and `users` (Slack user
    /// id → reviewer); or why not.
    pub fn new(
        api_url: &str,
        bot_token: Hidden,
        signing_secret: Hidden,
        channels: BTreeMap<String, String>,
        users: BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let url = reqwest::Url::parse(api_url).map_err(|e| format!("api_url is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("api_url: use http:// or https://".into());
        }
        if bot_token.expose().trim().is_empty() || signing_secret.expose().trim().is_empty() {
            return Err("the bot token and the signing secret must not be empty".into());
        }
        let http = airlock_webhook::http_client().map_err(|e| e.to_string())?;
        let trimmed = |secret: Hidden| Hidden::new(secret.expose().trim());
        Ok(Slack {
            api_url: api_url.trim_end_matches('/').to_owned(),
            bot_token: trimmed(bot_token),
            signing_secret: trimmed(signing_secret),
            channels,
            users,
            http,
        })
    }

    /// Reads the Slack file: `{api_url?, bot_token: {file | env}, signing_secret: {file |
    /// env}, channels: {pool: channel id}, users: {Slack user id: reviewer}}`; `env` looks
    /// environment variables up, files are relative to the Slack file.
    pub fn load(path: &Path, env: impl Fn(&str) -> Option<String>) -> Result<Self, SlackConfigError> {
        let invalid = |message: String| SlackConfigError::Invalid { path: path.to_owned(), message };
        let text =
            std::fs::read_to_string(path).map_err(|source| SlackConfigError::Read { path: path.to_owned(), source })?;
        let file: SlackFile = serde_saphyr::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let bot_token = file.bot_token.read(base, &env).map_err(|e| invalid(format!("bot_token: {e}")))?;
        let signing_secret =
            file.signing_secret.read(base, &env).map_err(|e| invalid(format!("signing_secret: {e}")))?;
        Slack::new(&file.api_url, Hidden::new(bot_token), Hidden::new(signing_secret), file.channels, file.users)
            .map_err(invalid)
    }

    /// What is wrong with this app for a service of `pools` and `reviewers`: a channel for a
    /// pool not served, or a user mapped to a reviewer the tokens file does not list.
    pub fn problem(&self, pools: &[String], reviewers: &Reviewers) -> Option<String> {
        if let Some(pool) = self.channels.keys().find(|pool| !pools.contains(pool)) {
            return Some(format!("Slack: a channel is set for pool '{pool}', which this service does not serve"));
        }
        if let Some((user, name)) = self.users.iter().find(|(_, name)| reviewers.by_name(name).is_none()) {
            return Some(format!("Slack: user {user} is mapped to '{name}', who is not in the tokens file"));
        }
        None
    }

    /// The channel `pool`'s tasks are posted to, if any.
    pub fn channel(&self, pool: &str) -> Option<&str> {
        self.channels.get(pool).map(String::as_str)
    }

    /// The reviewer the Slack user `user` decides as, if mapped.
    pub fn reviewer(&self, user: &str) -> Option<&str> {
        self.users.get(user).map(String::as_str)
    }

    /// The HTTP client of the Web API.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }
}

#[cfg(test)]
mod tests;
