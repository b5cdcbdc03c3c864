//! What the routes share, and sending one request: a new record goes to the fleet in a task
//! of its own, which settles the record and then posts the webhook, if any.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use airlock_client::{Client, ClientError};
use airlock_contract::v1;
use airlock_policy::Kind;
use airlock_records::view::{DecisionView, Refusal};
use airlock_telemetry::metrics::Metrics;
use airlock_transport::Transport;
use prost::Message as _;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Limits;
use crate::answer::{ErrorBody, status_of};
use crate::decisions::store::StoreError;
use crate::decisions::{Decisions, Failure, Opened, Outcome};
use crate::limit::RateLimits;
use crate::submission::Submission;
use crate::tokens::Tokens;
use crate::webhook::log::LogError;
use crate::webhook::{DECISION_READY, Event, Webhooks, rfc3339_now};

/// A decision being asked for.
pub type Asking = Pin<Box<dyn Future<Output = Result<v1::Decision, ClientError>> + Send>>;

/// Whom the gateway asks: the runner client, or a stand-in in tests.
pub trait Fleet: Send + Sync {
    /// Sends `request` and waits for its decision, at most `timeout` (then it fails closed).
    fn decide(&self, request: v1::Request, timeout: Duration) -> Asking;
    /// Stops: calls still waiting end with [`ClientError::Closed`].
    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

impl<T: Transport> Fleet for Client<T> {
    fn decide(&self, request: v1::Request, timeout: Duration) -> Asking {
        let client = self.clone();
        Box::pin(async move { client.decide(request, Some(timeout)).await })
    }

    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(Client::close(self))
    }
}

/// What the routes share.
pub struct Shared {
    /// The records of requests sent.
    pub decisions: Arc<Decisions>,
    /// Whom requests go to.
    pub fleet: Arc<dyn Fleet>,
    /// Who may ask.
    pub tokens: Tokens,
    /// Sizes, waits and rates.
    pub limits: Limits,
    /// Each caller's bucket.
    pub rates: RateLimits,
    /// The webhook sender, when callbacks are configured.
    pub webhooks: Option<Webhooks>,
    /// The requests under way and their webhooks.
    pub tasks: TaskTracker,
    /// Cancelled when the gateway stops: waiting responses answer at once.
    pub stop: CancellationToken,
    /// What the gateway counts.
    pub metrics: Arc<Metrics>,
    /// The OpenAPI document served, with this gateway's limits ([`crate::openapi::document`]).
    pub openapi: String,
}

impl Shared {
    /// The state of a gateway asking `fleet`, counting in `metrics`.
    pub fn new(
        fleet: Arc<dyn Fleet>,
        tokens: Tokens,
        limits: Limits,
        webhooks: Option<Webhooks>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Shared {
            decisions: Arc::new(Decisions::new(limits.retention, limits.pending)),
            fleet,
            tokens,
            rates: RateLimits::new(limits.rate),
            limits,
            webhooks,
            tasks: TaskTracker::new(),
            stop: CancellationToken::new(),
            metrics,
            openapi: crate::openapi::document(&limits),
        }
    }

    /// Keeps records in `decisions` (restored from a store) rather than in memory only.
    pub fn with_decisions(self, decisions: Decisions) -> Self {
        Shared { decisions: Arc::new(decisions), ..self }
    }

    /// Resumes the webhooks an earlier run left in the delivery log; how many.
    pub async fn resume_webhooks(&self) -> Result<usize, LogError> {
        let Some(webhooks) = &self.webhooks else { return Ok(0) };
        let left = webhooks.resume().await?;
        let count = left.len();
        for delivery in left {
            let (webhooks, stop) = (webhooks.clone(), self.stop.clone());
            self.tasks.spawn(async move { webhooks.deliver(delivery, &stop).await });
        }
        Ok(count)
    }

    /// The record of `owner`'s request under `key`, whose body was `size` bytes: an earlier
    /// one that asked the same, or a new one whose request is sent now (once the store, if
    /// any, holds the record), its call key in `owner`'s namespace ([`v1::CallKey::tenant`]).
    pub async fn submit(
        &self,
        owner: &Arc<str>,
        key: String,
        submission: &Submission,
        size: usize,
    ) -> Result<Opened, StoreError> {
        let mut request = submission.to_request();
        // What was asked, without the tenant: the owner keys the record already, and records
        // stored before keys named tenants keep their fingerprints.
        let fingerprint: [u8; 32] = Sha256::digest(request.encode_to_vec()).into();
        if let Some(key) = request.key.as_mut() {
            key.tenant = owner.to_string();
        }
        let opened = self.decisions.open(owner, key, fingerprint, size).await?;
        if let Opened::New { id, .. } = &opened {
            let asking = self.fleet.decide(request, submission.timeout.unwrap_or(self.limits.default_timeout));
            let callback = submission.callback.clone().zip(self.webhooks.clone());
            let (decisions, id, about) = (self.decisions.clone(), id.clone(), About::of(submission));
            let (metrics, stop) = (self.metrics.clone(), self.stop.clone());
            metrics.gateway_waiting.inc();
            self.tasks.spawn(async move {
                let outcome = outcome_of(asking.await);
                metrics.gateway_waiting.dec();
                let event = callback.map(|(url, webhooks)| (url, webhooks, about.event(&id, &outcome)));
                decisions.settle(&id, outcome).await;
                if let Some((url, webhooks, body)) = event {
                    webhooks.send(&url, &id, body, &stop).await;
                }
            });
        }
        Ok(opened)
    }
}

/// What the fleet's answer means for the record.
fn outcome_of(answer: Result<v1::Decision, ClientError>) -> Outcome {
    match answer {
        Ok(decision) => Outcome::Decided(Box::new(DecisionView::from_wire(&decision))),
        Err(ClientError::Refused { code, message }) => Outcome::Refused(Refusal { code, message }),
        Err(ClientError::AlreadyPending(key)) => Outcome::Failed(Failure::AlreadyPending(key)),
        // The client closes only as the gateway stops: the request was sent, its answer lost.
        Err(ClientError::Closed) => Outcome::Failed(Failure::Restarted),
        Err(e) => Outcome::Failed(Failure::Unavailable(e.to_string())),
    }
}

/// What a webhook says about its request besides the outcome.
struct About {
    kind: Kind,
    call_id: String,
    origin: OriginView,
}

/// The origin as the API names it.
#[derive(Debug, Clone, Serialize)]
struct OriginView {
    run: String,
    sample: String,
    epoch: u32,
}

/// The `data` of a `decision.ready` event.
#[derive(Debug, Serialize)]
struct DecisionEvent<'a> {
    id: &'a str,
    kind: &'static str,
    call_id: &'a str,
    origin: &'a OriginView,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'a DecisionView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody>,
}

impl About {
    fn of(submission: &Submission) -> Self {
        let origin = &submission.origin;
        About {
            kind: submission.kind,
            call_id: submission.call.id.clone(),
            origin: OriginView { run: origin.run.clone(), sample: origin.sample.clone(), epoch: origin.epoch },
        }
    }

    /// The event's JSON body.
    fn event(&self, id: &str, outcome: &Outcome) -> Vec<u8> {
        let (decision, error) = match outcome {
            Outcome::Decided(decision) => (Some(&**decision), None),
            other => (None, ErrorBody::of_outcome(other)),
        };
        let data = DecisionEvent {
            id,
            kind: match self.kind {
                Kind::Approval => "approval",
                Kind::Review => "review",
            },
            call_id: &self.call_id,
            origin: &self.origin,
            status: status_of(outcome).as_u16(),
            decision,
            error,
        };
        let event = Event { kind: DECISION_READY, timestamp: rfc3339_now(), data };
        serde_json::to_vec(&event).expect("an event serialises")
    }
}
