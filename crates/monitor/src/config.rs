//! How a monitor runs: typed, checked once before it connects to anything.

use std::sync::Arc;

use airlock_policy::{Decision, Kind};
use airlock_telemetry::metrics::Metrics;
use airlock_transport::message::MAX_SHORT_STRING;

use crate::prompt::{Limits, Template};
use crate::provider::ProviderConfig;
use crate::retry::RetryPolicy;
use crate::sampling::SamplingConfig;

/// A monitor's configuration.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// The fleet's prefix: every queue and exchange name starts with it.
    pub prefix: String,
    /// The external step served: tasks come from `<prefix>.step.<step>`.
    pub step: String,
    /// Recorded, with the model, as `decided_by` of every answer (`<id>/<model>`).
    pub monitor_id: String,
    /// Tasks handled at once, and so model calls in flight at most (the consumer's prefetch):
    /// the limit that protects the provider.
    pub concurrency: u16,
    /// The model that scores calls, and its API.
    pub provider: ProviderConfig,
    /// The trusted model that edits and proposes calls (`trusted_edit`, `defer_to_trusted`);
    /// `None`: the scoring model.
    pub trusted: Option<ProviderConfig>,
    /// The API the untrusted model is sampled again through (`resample`); `None`: the scoring
    /// model's. Its model, when empty, is the one the request names (`generation.model`).
    pub untrusted: Option<ProviderConfig>,
    /// The user message's template.
    pub template: Template,
    /// How much of a request goes into a prompt.
    pub limits: Limits,
    /// What to answer when the model cannot (errors that retries did not cure, invalid step
    /// parameters), unless the step's `fallback` parameter says otherwise. `reject` means
    /// `terminate` in a review chain and `approve` means `continue`.
    pub fallback: Decision,
    /// Retries and time limits of model calls.
    pub retry: RetryPolicy,
    /// The cache of model answers and the rate limiter shared with the fleet.
    pub sampling: SamplingConfig,
    /// Where the monitor counts what it does (shared with whoever serves the metrics).
    pub metrics: Arc<Metrics>,
}

/// The configuration cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl MonitorConfig {
    /// Checks what can be checked without the network.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |text: String| Err(ConfigError(text));
        if self.step.is_empty() || self.step.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad(format!("step name {:?}: it must be non-empty, without spaces", self.step));
        }
        if self.prefix.len() + self.step.len() + ".step.".len() > MAX_SHORT_STRING {
            return bad(format!("the step queue's name would be longer than {MAX_SHORT_STRING} bytes"));
        }
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1".into());
        }
        if self.provider.model.trim().is_empty() {
            return bad("a model is required".into());
        }
        if self.trusted.as_ref().is_some_and(|trusted| trusted.model.trim().is_empty()) {
            return bad("the trusted model needs a name".into());
        }
        if self.fallback == Decision::Modify {
            return bad("the fallback cannot be modify: there is no call to run instead".into());
        }
        if self.retry.attempts == 0 {
            return bad("at least one attempt is required".into());
        }
        if self.retry.attempt_timeout.is_zero() {
            return bad("the request timeout must be positive".into());
        }
        if self.sampling.cache_retention.as_secs() == 0 {
            return bad("the cache retention must be at least a second".into());
        }
        if let Some(limit) = &self.sampling.rate_limit {
            let limiter = &limit.limiter;
            if limiter.is_empty() || limiter.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return bad(format!("limiter name {limiter:?}: it must be non-empty, without spaces"));
            }
            if self.prefix.len() + limiter.len() + ".limiter.".len() > MAX_SHORT_STRING {
                return bad(format!("the limiter's log name would be longer than {MAX_SHORT_STRING} bytes"));
            }
            if limit.per_minute == 0 {
                return bad("the rate limit must be at least 1 request per minute".into());
            }
        }
        Ok(())
    }

    /// The fallback as a decision of `kind`.
    pub fn fallback_for(&self, kind: Kind) -> Decision {
        as_kind(self.fallback, kind)
    }
}

/// `decision` in a chain of `kind`: in a review, `reject` is `terminate` and `approve` is
/// `continue`; in an approval, `continue` is `approve`.
pub fn as_kind(decision: Decision, kind: Kind) -> Decision {
    match (kind, decision) {
        (Kind::Review, Decision::Reject) => Decision::Terminate,
        (Kind::Review, Decision::Approve) => Decision::Continue,
        (Kind::Approval, Decision::Continue) => Decision::Approve,
        (_, other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderKind;
    use crate::sampling::RateLimit;

    fn config() -> MonitorConfig {
        MonitorConfig {
            prefix: "airlock".into(),
            step: "monitor".into(),
            monitor_id: "m".into(),
            concurrency: 8,
            provider: ProviderConfig {
                kind: ProviderKind::OpenAi,
                base_url: "http://127.0.0.1:1/v1".into(),
                model: "gpt".into(),
                api_key: None,
                structured: true,
                max_tokens: None,
                temperature: None,
            },
            trusted: None,
            untrusted: None,
            template: Template::default(),
            limits: Limits::default(),
            fallback: Decision::Escalate,
            retry: RetryPolicy::default(),
            sampling: SamplingConfig::default(),
            metrics: Arc::default(),
        }
    }

    #[test]
    fn checks_the_configuration() {
        assert_eq!(config().validate(), Ok(()));
        type Change = fn(&mut MonitorConfig);
        let cases: [(Change, &str); 7] = [
            (|c| c.step = "my step".into(), "without spaces"),
            (|c| c.concurrency = 0, "concurrency"),
            (|c| c.provider.model = " ".into(), "model"),
            (|c| c.fallback = Decision::Modify, "cannot be modify"),
            (|c| c.prefix = "p".repeat(300), "longer than 255"),
            (|c| c.sampling.rate_limit = Some(RateLimit { limiter: "my key".into(), per_minute: 60 }), "limiter name"),
            (|c| c.sampling.rate_limit = Some(RateLimit { limiter: "k".into(), per_minute: 0 }), "at least 1 request"),
        ];
        for (change, expected) in cases {
            let mut c = config();
            change(&mut c);
            let error = c.validate().unwrap_err().0;
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn fallbacks_follow_the_chain_kind() {
        let mut c = config();
        c.fallback = Decision::Reject;
        assert_eq!(
            (c.fallback_for(Kind::Approval), c.fallback_for(Kind::Review)),
            (Decision::Reject, Decision::Terminate)
        );
        c.fallback = Decision::Escalate;
        assert_eq!(c.fallback_for(Kind::Review), Decision::Escalate);
        assert_eq!(as_kind(Decision::Approve, Kind::Review), Decision::Continue);
    }
}
