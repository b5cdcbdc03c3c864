//! The fleet's side of the bench: approval requests through `airlock_client::Client` to real
//! policy workers, each carrying its policy inline, padded to the size asked for.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_client::{Client, ClientConfig, ClientStats, TIMEOUT_APPROVER};
use airlock_contract::v1;
use airlock_policy::{Call, Kind};
use airlock_transport::{AmqpTransport, Message};
use prost::Message as _;
use serde_json::{Map, Value};

use super::children::Children;
use super::traffic::{Load, Outcome, Phase, Requester};
use super::{Settings, Shared};
use crate::commands::Failure;
use airlock_client::request::build as build_request;
use airlock_records::time::Deadline;

/// The bench's policy: a shell call walks a pattern and an allow-list, both escalate, and
/// the catch-all approves. Every step is built in: no external queue is involved. Shared with
/// the worker's handler benchmark (`bench/fleet-policy.yaml`).
pub const POLICY: &str = include_str!("../../../../../bench/fleet-policy.yaml");

/// The call every request asks about.
const COMMAND: &str = "python3 train.py --epochs 3 --data /workspace/data";

/// The assistant's text, repeated to pad a request to its size.
const FILLER: &str = "I will run the training script on the prepared data and then look at the loss curve. ";

/// The runner's side of the fleet, warmed up and ready to measure.
pub struct FleetLoad {
    load: Load<Asker>,
    request_bytes: usize,
}

impl FleetLoad {
    /// Connects a client as `config` says and warms the fleet up until every worker in
    /// `workers` (their `--id`s; none: any worker) has decided.
    pub async fn start(
        transport: AmqpTransport,
        config: ClientConfig,
        settings: &Settings,
        workers: &[String],
        children: &mut Children,
        shared: &Shared,
    ) -> Result<Self, Failure> {
        let prefix = config.prefix.clone();
        let client = Client::connect(transport, config).await.map_err(|e| Failure::other(format!("client: {e}")))?;
        let (template, request_bytes) = template(settings.size, client.reply_queue(), settings.timeout);
        let asker = Asker { client, template, timeout: settings.timeout, shared: shared.clone() };
        let load = Load::start(asker, settings, children, || {
            let error = shared.first_error().map(|e| format!(" ({e})")).unwrap_or_default();
            format!("is a worker consuming on prefix '{prefix}'?{error}")
        })
        .await?;
        let started = Instant::now();
        for round in 1.. {
            let missing: Vec<&String> = workers.iter().filter(|w| !shared.seen(w)).collect();
            if missing.is_empty() {
                break;
            }
            if started.elapsed() > settings.timeout {
                return Err(Failure::other(format!(
                    "no decision from {missing:?} after warming up for {:?}",
                    started.elapsed()
                )));
            }
            load.warm_up(round, settings).await;
            children.check_alive()?;
        }
        Ok(FleetLoad { load, request_bytes })
    }

    /// Measures `requests` requests, `inflight` at a time.
    pub async fn run(&mut self, requests: u64, inflight: usize) -> Phase {
        self.load.run(requests, inflight).await
    }

    /// The encoded size of a request as sent.
    pub fn request_bytes(&self) -> usize {
        self.request_bytes
    }

    /// Closes the client; returns its counters over the whole run (the replies it ignored,
    /// duplicates or late ones; the requests it published again).
    pub async fn finish(self) -> ClientStats {
        let client = &self.load.requester().client;
        let stats = client.stats();
        client.close().await;
        stats
    }
}

/// Sends requests through the client, each a copy of the template with its own key.
struct Asker {
    client: Client<AmqpTransport>,
    template: v1::Request,
    timeout: Duration,
    shared: Shared,
}

impl Requester for Asker {
    fn call(self: Arc<Self>, run: Arc<str>, index: u64) -> impl Future<Output = Outcome> + Send + 'static {
        let mut request = self.template.clone();
        request.key = Some(key(&run, index));
        async move {
            match self.client.decide(request, Some(self.timeout)).await {
                Ok(decision) if decision.approver == TIMEOUT_APPROVER => Outcome::Lost,
                Ok(decision) => {
                    self.shared.saw(decision.decided_by);
                    Outcome::Answered
                }
                Err(e) => {
                    self.shared.error(e.to_string());
                    Outcome::Lost
                }
            }
        }
    }

    fn duplicates(&self) -> u64 {
        self.client.stats().ignored_replies
    }
}

pub(super) fn key(run_id: &str, index: u64) -> v1::CallKey {
    v1::CallKey {
        run_id: run_id.to_owned(),
        sample_id: format!("sample-{:02}", index % 64),
        epoch: 1,
        tool_call_id: format!("call-{index:05}"),
        ..Default::default()
    }
}

/// The request every call of the bench sends (its key set per call), with the assistant's
/// message padded so the request, as the client sends it, encodes to about `size` bytes;
/// and that encoded size.
pub(super) fn template(size: usize, reply_queue: &str, timeout: Duration) -> (v1::Request, usize) {
    let mut arguments = Map::new();
    arguments.insert("cmd".into(), Value::String(COMMAND.into()));
    let call = Call { id: "call".into(), function: "bash".into(), arguments };
    let policy = v1::policy::Source::Inline(POLICY.into());
    let mut request = build_request(key("measured", 0), &call, Kind::Approval, policy, "", "");
    // What the client fills in before sending counts too.
    let mut probe = request.clone();
    probe.reply_to = reply_queue.to_owned();
    probe.requested_at_unix_ms = airlock_records::time::now_ms();
    probe.deadline_unix_ms = Deadline::after(probe.requested_at_unix_ms, timeout).unix_ms();
    let mut pad = 0;
    for _ in 0..4 {
        set_message(&mut probe, &filler(pad));
        let len = probe.encoded_len();
        if len == size {
            break;
        }
        pad = (pad + size).saturating_sub(len);
    }
    let message = filler(pad);
    set_message(&mut probe, &message);
    set_message(&mut request, &message);
    (request, probe.encoded_len())
}

fn set_message(request: &mut v1::Request, text: &str) {
    if let Some(v1::request::Body::Approval(approval)) = &mut request.body {
        approval.message = text.to_owned();
    }
}

fn filler(len: usize) -> String {
    FILLER.chars().cycle().take(len).collect()
}

/// The echo's request body: a fleet request of the same size, encoded once.
pub fn echo_body(size: usize, reply_queue: &str, timeout: Duration) -> Message {
    let (mut request, _) = template(size, reply_queue, timeout);
    request.reply_to = reply_queue.to_owned();
    request.requested_at_unix_ms = airlock_records::time::now_ms();
    request.deadline_unix_ms = Deadline::after(request.requested_at_unix_ms, timeout).unix_ms();
    Message::new(request.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_compiles_and_the_call_walks_to_the_catch_all() {
        let document = airlock_policy::document::Document::parse("<bench>", POLICY).expect("parses");
        let policy = airlock_policy::chain::Policy::compile(&document, Kind::Approval).expect("compiles");
        assert_eq!(policy.steps().len(), 4);
        let (request, _) = template(1500, "p.reply.r", Duration::from_secs(30));
        let Some(v1::request::Body::Approval(approval)) = &request.body else { panic!() };
        let call = airlock_records::convert::call_from_wire(approval.call.as_ref().unwrap()).unwrap();
        let input =
            airlock_policy::chain::Input { call: &call, message: &approval.message, output: None, metadata: None };
        let airlock_policy::chain::Verdict::Decided(outcome) = policy.evaluate(&input, Default::default()) else {
            panic!("built-in steps decide")
        };
        assert_eq!(outcome.decision, airlock_policy::Decision::Approve);
        assert_eq!(outcome.step, Some(3));
        assert_eq!(outcome.trail.len(), 3, "pattern and allow-list escalate first");
    }

    #[test]
    fn requests_are_padded_to_the_size() {
        for size in [600, 1500, 4000, 20_000] {
            let (_, bytes) = template(size, "airlock-bench-1.reply.bench-1", Duration::from_secs(30));
            assert!(bytes.abs_diff(size) <= 2, "{size}: {bytes}");
        }
        let (_, small) = template(10, "q", Duration::from_secs(30));
        assert!(small > 10, "a request never shrinks below its fields");
    }
}
