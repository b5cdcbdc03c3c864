//! Model providers, one module each, behind one enum: OpenAI-compatible chat completions
//! (OpenAI, vLLM, Ollama, llama.cpp's server, …) and Anthropic Messages.
//!
//! Each provider module is pure: it builds the request body and reads the response body.
//! This module does the HTTP, in [`Provider::send`], the one place a model request is sent
//! (through the fleet's cache of answers and its rate limiter, [`crate::sampling`]), and sorts
//! failures into [`AttemptError`]s the retry loop understands: 429, 408 and 5xx (Anthropic's
//! 529 included) are retried; other statuses, refusals and bad configuration are not.

pub mod anthropic;
pub mod openai;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_records::monitor::NoteCall;
use bytes::Bytes;
use reqwest::StatusCode;
use rustls_platform_verifier::BuilderVerifierExt;
use serde_json::Value;
use tokio::time::Instant;

use crate::answer::FallbackCode;
use crate::prompt::Prompt;
use crate::retry::{self, Retryable};
use crate::sampling::{Cache, Draw, Key, Limiter};
use crate::score::{Score, ScoreError, excerpt};

/// How long connecting to the provider may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI chat completions (`POST {base}/chat/completions`), also served by vLLM,
    /// Ollama and llama.cpp.
    OpenAi,
    /// Anthropic Messages (`POST {base}/v1/messages`).
    Anthropic,
}

/// Where and how to ask a model.
#[derive(Clone)]
pub struct ProviderConfig {
    /// The API.
    pub kind: ProviderKind,
    /// The API's base URL: `https://api.openai.com/v1` for OpenAI (the part before
    /// `/chat/completions`), `https://api.anthropic.com` for Anthropic (before `/v1/messages`).
    pub base_url: String,
    /// The model's name, as the API knows it.
    pub model: String,
    /// The API key; `None` sends none (local servers often need none).
    pub api_key: Option<String>,
    /// Ask for structured output: a JSON schema (OpenAI) or a forced tool call (Anthropic).
    /// Off, the system prompt alone asks for JSON, for servers that reject those fields.
    pub structured: bool,
    /// The longest reply, in tokens (Anthropic requires one; OpenAI gets none when `None`).
    pub max_tokens: Option<u32>,
    /// Sampling temperature; `None` leaves the API's default (some reasoning models accept
    /// no other).
    pub temperature: Option<f64>,
}

/// A configured provider with its HTTP client, and the cache and rate limiter its requests go
/// through. Cheap to clone.
#[derive(Clone)]
pub struct Provider {
    config: Arc<ProviderConfig>,
    endpoint: String,
    http: reqwest::Client,
    cache: Option<Arc<Cache>>,
    limiter: Option<Arc<Limiter>>,
}

/// A request for a tool call: the conversation so far, the tools offered, and how the
/// model must choose among them.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The model asked (the trusted model's name, or the untrusted model's from the request).
    pub model: String,
    /// The conversation, oldest first, as the runner recorded it (system messages included).
    pub messages: Vec<v1::ChatMessage>,
    /// The tools offered.
    pub tools: Vec<Tool>,
    /// Whether the model must call a tool, and which.
    pub choice: ToolChoice,
    /// How to sample.
    pub settings: Settings,
    /// Tells apart requests whose input is otherwise the same (the samples of one call, each
    /// drawn once): sent as the API's end-user field (`user`, `metadata.user_id`).
    pub tag: Option<String>,
}

/// A tool as a model is offered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// What the model is told it does.
    pub description: String,
    /// The JSON Schema of its parameters.
    pub parameters: serde_json::Value,
}

/// Which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// Any, or none (the model's choice, as the runner asked it).
    Auto,
    /// One of the tools offered.
    Any,
    /// This one.
    Function(String),
}

/// Sampling settings of a tool-call request; `None` leaves the API's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// The longest reply, in tokens.
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Vec<String>,
}

/// One attempt at a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AttemptError {
    /// The API answered with an error status.
    #[error("the provider answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The wait it asked for (`Retry-After`).
        retry_after: Option<Duration>,
        /// The API's error message.
        message: String,
    },
    /// No (complete) answer within the attempt's time.
    #[error("the provider did not answer within {0:?}")]
    Timeout(Duration),
    /// The provider could not be reached or dropped the connection.
    #[error("the provider is unreachable: {0}")]
    Unreachable(String),
    /// The response is not what the API documents (not JSON, no choices, no content).
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The model answered, but with no usable score.
    #[error(transparent)]
    NoScore(#[from] ScoreError),
    /// The model refused to answer.
    #[error("the model refused: {0}")]
    Refused(String),
    /// The model was asked for a tool call and made none (or one that cannot run).
    #[error("no tool call: {0}")]
    NoCall(String),
}

/// The provider cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// TLS could not be configured.
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    /// The base URL is not an http(s) URL.
    #[error("base URL {0:?}: expected http:// or https://")]
    BaseUrl(String),
}

// === impl ProviderKind ===

impl ProviderKind {
    /// The official API's base URL.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The environment variable the official SDKs read the key from.
    pub fn default_key_env(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The name used on the command line and in metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

impl FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "openai" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            other => Err(format!("unknown provider '{other}': expected openai or anthropic")),
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key.
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("structured", &self.structured)
            .field("max_tokens", &self.max_tokens)
            .field("temperature", &self.temperature)
            .finish()
    }
}

// === impl Provider ===

impl Provider {
    /// A provider for `config`, with an HTTP client that verifies TLS certificates against
    /// the platform's roots (rustls with ring).
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ProviderError::BaseUrl(config.base_url.clone()));
        }
        let endpoint = match config.kind {
            ProviderKind::OpenAi => format!("{base}/{}", openai::PATH),
            ProviderKind::Anthropic => format!("{base}/{}", anthropic::PATH),
        };
        let crypto = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(crypto)
            .with_safe_default_protocol_versions()?
            .with_platform_verifier()?
            .with_no_client_auth();
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("airlock-monitor/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Provider { config: Arc::new(config), endpoint, http, cache: None, limiter: None })
    }

    /// The provider with answers taken from and kept in `cache`.
    #[must_use]
    pub fn with_cache(self, cache: Arc<Cache>) -> Self {
        Provider { cache: Some(cache), ..self }
    }

    /// The provider with its requests paced by `limiter`.
    #[must_use]
    pub fn with_limiter(self, limiter: Arc<Limiter>) -> Self {
        Provider { limiter: Some(limiter), ..self }
    }

    /// The configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Asks the model once, within `timeout`, how suspicious the call of `prompt` is, as draw
    /// `draw` of that context.
    pub async fn ask(&self, prompt: &Prompt, draw: Draw, timeout: Duration) -> Result<Score, AttemptError> {
        let config = &*self.config;
        let body = match config.kind {
            ProviderKind::OpenAi => openai::request_body(config, prompt),
            ProviderKind::Anthropic => anthropic::request_body(config, prompt),
        };
        self.send(&body, draw, timeout, |bytes| match config.kind {
            ProviderKind::OpenAi => openai::read_response(config, prompt, bytes),
            ProviderKind::Anthropic => anthropic::read_response(config, prompt, bytes),
        })
        .await
    }

    /// Asks the model once, within `timeout`, for a tool call (a control protocol's edit,
    /// proposal or sample), through the API's tool calling, as draw `draw` of its context; a
    /// call of another tool than a required one is an error.
    pub async fn call(&self, request: &CallRequest, draw: Draw, timeout: Duration) -> Result<NoteCall, AttemptError> {
        let config = &*self.config;
        let body = match config.kind {
            ProviderKind::OpenAi => openai::call_body(config, request),
            ProviderKind::Anthropic => anthropic::call_body(config, request),
        };
        self.send(&body, draw, timeout, |bytes| {
            let call = match config.kind {
                ProviderKind::OpenAi => openai::read_call(bytes),
                ProviderKind::Anthropic => anthropic::read_call(bytes),
            }?;
            // A call of another tool than the one required is no answer: never kept, asked again.
            match &request.choice {
                ToolChoice::Function(required) if call.function != *required => {
                    Err(AttemptError::NoCall(format!("the model called {}, not {required}", call.function)))
                }
                _ => Ok(call),
            }
        })
        .await
    }

    /// Sends one model request with `body` as draw `draw` of its context, within `timeout`,
    /// and returns what `read` makes of the response body. Every model request goes through
    /// here: an identical one (same body, same draw; see [`Key`]) the fleet has answered is
    /// answered from the cache without asking the model, identical ones in flight (on any
    /// process of the step) share one request, and the rest wait for the rate limiter. Only
    /// answers `read` accepts are kept.
    pub async fn send<T>(
        &self,
        body: &Value,
        draw: Draw,
        timeout: Duration,
        read: impl Fn(&[u8]) -> Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        match &self.cache {
            Some(cache) => cache.get_or_ask(self.key(body, draw), timeout, self.post(body, timeout), read).await,
            None => read(&self.post(body, timeout).await?),
        }
    }

    /// The key of a request with `body` as draw `draw`: the provider's kind, endpoint and
    /// model with them, never its API key.
    pub fn key(&self, body: &Value, draw: Draw) -> Key {
        Key::of(self.config.kind.as_str(), &self.endpoint, &self.config.model, body, draw)
    }

    /// POSTs `body` once the rate limiter allows it, within `timeout` in all.
    async fn post(&self, body: &Value, timeout: Duration) -> Result<Bytes, AttemptError> {
        let config = &*self.config;
        let started = Instant::now();
        if let Some(limiter) = &self.limiter {
            tokio::time::timeout(timeout, limiter.acquire()).await.map_err(|_| AttemptError::Timeout(timeout))?;
        }
        let request = match config.kind {
            ProviderKind::OpenAi => {
                let request = self.http.post(&self.endpoint);
                match &config.api_key {
                    Some(key) => request.bearer_auth(key),
                    None => request,
                }
            }
            ProviderKind::Anthropic => {
                let request = self.http.post(&self.endpoint).header(anthropic::VERSION_HEADER, anthropic::VERSION);
                match &config.api_key {
                    Some(key) => request.header(anthropic::KEY_HEADER, key),
                    None => request,
                }
            }
        };
        let left = timeout.saturating_sub(started.elapsed());
        let response = request.json(body).timeout(left).send().await.map_err(|e| transport_error(&e, timeout))?;
        let status = response.status();
        let retry_after = retry::retry_after(response.headers());
        let bytes = response.bytes().await.map_err(|e| transport_error(&e, timeout))?;
        if !status.is_success() {
            if status == StatusCode::TOO_MANY_REQUESTS
                && let (Some(limiter), Some(wait)) = (&self.limiter, retry_after)
            {
                limiter.pause(wait);
            }
            let message = match config.kind {
                ProviderKind::OpenAi => openai::error_message(&bytes),
                ProviderKind::Anthropic => anthropic::error_message(&bytes),
            };
            return Err(AttemptError::Status { status: status.as_u16(), retry_after, message });
        }
        Ok(bytes)
    }
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider").field("config", &self.config).field("endpoint", &self.endpoint).finish()
    }
}

fn transport_error(error: &reqwest::Error, timeout: Duration) -> AttemptError {
    if error.is_timeout() {
        AttemptError::Timeout(timeout)
    } else {
        // The full chain: reqwest's own message ("error sending request") says little.
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        AttemptError::Unreachable(text)
    }
}

/// The error text of a response body: the API's `error.message` when it has one.
pub(crate) fn body_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = value.pointer("/error/message").and_then(|m| m.as_str())
    {
        return message.to_owned();
    }
    excerpt(String::from_utf8_lossy(body).trim())
}

/// A call read from a reply: it must name a tool.
fn named_call(name: &str, arguments: serde_json::Map<String, serde_json::Value>) -> Result<NoteCall, AttemptError> {
    if name.trim().is_empty() {
        return Err(AttemptError::NoCall("the call names no tool".into()));
    }
    Ok(NoteCall { function: name.to_owned(), arguments })
}

// === impl AttemptError ===

impl AttemptError {
    /// A short, stable name for metadata and logs.
    pub fn code(&self) -> FallbackCode {
        match self {
            AttemptError::Status { status: 429, .. } => FallbackCode::RateLimited,
            AttemptError::Status { .. } => FallbackCode::HttpStatus,
            AttemptError::Timeout(_) => FallbackCode::Timeout,
            AttemptError::Unreachable(_) => FallbackCode::Unreachable,
            AttemptError::Malformed(_) => FallbackCode::MalformedResponse,
            AttemptError::NoScore(_) => FallbackCode::NoScore,
            AttemptError::Refused(_) => FallbackCode::Refused,
            AttemptError::NoCall(_) => FallbackCode::NoCall,
        }
    }
}

impl Retryable for AttemptError {
    fn is_retryable(&self) -> bool {
        match self {
            AttemptError::Status { status, .. } => {
                let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                status == StatusCode::TOO_MANY_REQUESTS
                    || status == StatusCode::REQUEST_TIMEOUT
                    || status == StatusCode::CONFLICT
                    || status.is_server_error()
            }
            // A model sampled again may well produce a score the second time.
            AttemptError::Timeout(_) | AttemptError::Unreachable(_) | AttemptError::Malformed(_) => true,
            AttemptError::NoScore(_) | AttemptError::NoCall(_) => true,
            AttemptError::Refused(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_statuses_into_retryable_and_final() {
        let status = |status| AttemptError::Status { status, retry_after: None, message: String::new() };
        for retried in [429, 408, 409, 500, 502, 503, 504, 529] {
            assert!(status(retried).is_retryable(), "{retried}");
        }
        for fatal in [400, 401, 403, 404, 422] {
            assert!(!status(fatal).is_retryable(), "{fatal}");
        }
        assert!(AttemptError::Timeout(Duration::from_secs(1)).is_retryable());
        assert!(!AttemptError::Refused("no".into()).is_retryable());
        assert_eq!(status(429).code(), FallbackCode::RateLimited);
    }

    #[test]
    fn builds_endpoints_and_refuses_other_schemes() {
        let config = |kind, base_url: &str| ProviderConfig {
            kind,
            base_url: base_url.into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
            structured: true,
            max_tokens: None,
            temperature: None,
        };
        let openai = Provider::new(config(ProviderKind::OpenAi, "http://127.0.0.1:1/v1/")).unwrap();
        assert_eq!(openai.endpoint(), "http://127.0.0.1:1/v1/chat/completions");
        let anthropic = Provider::new(config(ProviderKind::Anthropic, "https://api.anthropic.com")).unwrap();
        assert_eq!(anthropic.endpoint(), "https://api.anthropic.com/v1/messages");
        assert!(!format!("{anthropic:?}").contains("sk-secret"));
        assert!(matches!(Provider::new(config(ProviderKind::OpenAi, "ftp://x")), Err(ProviderError::BaseUrl(_))));
    }

    #[test]
    fn the_api_key_is_no_part_of_a_call_s_key() {
        let provider = |api_key: Option<&str>, model: &str| {
            Provider::new(ProviderConfig {
                kind: ProviderKind::OpenAi,
                base_url: "http://127.0.0.1:1/v1".into(),
                model: model.into(),
                api_key: api_key.map(str::to_owned),
                structured: true,
                max_tokens: None,
                temperature: None,
            })
            .unwrap()
        };
        let body = serde_json::json!({"model": "m", "messages": []});
        let key = |p: Provider| p.key(&body, Draw::default());
        assert_eq!(key(provider(Some("sk-one"), "m")), key(provider(Some("sk-two"), "m")));
        assert_eq!(key(provider(Some("sk-one"), "m")), key(provider(None, "m")));
        assert_ne!(key(provider(None, "m")), key(provider(None, "m2")));
    }

    #[test]
    fn error_bodies_give_the_api_message() {
        assert_eq!(
            body_message(br#"{"error": {"message": "Rate limit reached", "type": "requests"}}"#),
            "Rate limit reached"
        );
        assert_eq!(body_message(b"<html>Bad Gateway</html>"), "<html>Bad Gateway</html>");
    }
}
