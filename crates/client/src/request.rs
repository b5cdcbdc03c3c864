//! One request through the fleet, as `airlock request` (and the demo and the benchmark)
//! send it: building the wire request for a call, and a one-shot client around it.

use std::time::Duration;

use airlock_contract::v1;
use airlock_policy::{Call, Kind};
use airlock_records::convert::call_to_wire;
use airlock_records::view::EvalMode;
use airlock_transport::Transport;
use serde_json::{Map, Value};

use crate::{Client, ClientConfig, ClientError, Repeats, ReplyTrust};

/// A request for one call, ready for a [`Client`] (which fills the deadline, the reply queue
/// and the request time).
pub fn build(
    key: v1::CallKey,
    call: &Call,
    kind: Kind,
    policy: v1::policy::Source,
    message: &str,
    output: &str,
) -> v1::Request {
    let wire_call = call_to_wire(call);
    let body = match kind {
        Kind::Approval => v1::request::Body::Approval(v1::ApprovalRequest {
            message: message.to_owned(),
            call: Some(wire_call),
            ..Default::default()
        }),
        Kind::Review => v1::request::Body::Review(v1::ReviewRequest {
            message: message.to_owned(),
            call: Some(wire_call),
            output: output.to_owned(),
            ..Default::default()
        }),
    };
    v1::Request {
        key: Some(key),
        body: Some(body),
        policy: Some(v1::Policy { source: Some(policy), digest: String::new() }),
        ..Default::default()
    }
}

/// Adds what the runner knows beside the call to `request`: what a person sees with it (the
/// view) and the tool's metadata, which `pattern`'s `metadata` parameter matches.
pub fn describe(request: &mut v1::Request, view: Option<v1::ToolCallView>, metadata: Option<&Map<String, Value>>) {
    let (call, shown) = match request.body.as_mut() {
        Some(v1::request::Body::Approval(approval)) => (approval.call.as_mut(), &mut approval.view),
        Some(v1::request::Body::Review(review)) => (review.call.as_mut(), &mut review.view),
        None => return,
    };
    if let (Some(call), Some(metadata)) = (call, metadata) {
        call.metadata_json = Value::Object(metadata.clone()).to_string();
    }
    *shown = view;
}

/// Labels `request` with its run's eval mode (`Origin.eval_mode`: honest or attack), which the
/// decision log keeps for `airlock monitor calibrate`; an origin is added if it has none.
pub fn label(request: &mut v1::Request, mode: EvalMode) {
    request.origin.get_or_insert_default().eval_mode = mode.as_str().to_owned();
}

/// One call to decide, from a runner that lives for this request only.
#[derive(Debug, Clone)]
pub struct OneRequest {
    /// The fleet's prefix.
    pub prefix: String,
    /// The policy, inline or by name.
    pub policy: v1::policy::Source,
    /// Which chain to run.
    pub kind: Kind,
    /// The call.
    pub call: Call,
    /// For a review: the tool's output.
    pub output: String,
    /// How long to wait before failing closed.
    pub timeout: Duration,
    /// Whether the decision must be proved by the fleet's keys.
    pub replies: ReplyTrust,
    /// The broker user the runner publishes as: its runner id starts with `<user>.`, as a
    /// least-privilege runner user's must (`airlock topology definitions`).
    pub user: String,
    /// The run's label for calibration, if any.
    pub eval_mode: Option<EvalMode>,
}

/// Sends `request` as its own runner (`<user>.request-<uuid>`, sample `request`, epoch 1, which
/// its origin names too) and waits for its decision; then closes the transport. A fleet that refuses the request answers
/// [`ClientError::Refused`].
pub async fn send<T: Transport>(transport: T, request: OneRequest) -> Result<v1::Decision, ClientError> {
    let runner_id = format!("{}.request-{}", request.user, uuid::Uuid::now_v7());
    let config = ClientConfig {
        prefix: request.prefix,
        runner_id: runner_id.clone(),
        default_timeout: request.timeout,
        replies: request.replies,
        repeats: Repeats::default(),
    };
    let client = match Client::connect(transport.clone(), config).await {
        Ok(client) => client,
        Err(e) => {
            transport.close().await;
            return Err(e);
        }
    };
    let key = v1::CallKey {
        run_id: runner_id.clone(),
        sample_id: "request".into(),
        epoch: 1,
        tool_call_id: request.call.id.clone(),
        ..Default::default()
    };
    let mut wire = build(key, &request.call, request.kind, request.policy, "", &request.output);
    wire.origin = Some(v1::Origin { run_id: runner_id, sample_id: "request".into(), epoch: 1, ..Default::default() });
    if let Some(mode) = request.eval_mode {
        label(&mut wire, mode);
    }
    let result = client.decide(wire, None).await;
    client.close().await;
    transport.close().await;
    result
}

#[cfg(test)]
mod tests {
    use airlock_transport::MemoryTransport;
    use serde_json::json;

    use super::*;

    fn call() -> Call {
        Call::from_json(&json!({"id": "c1", "function": "ls", "arguments": {"path": "/"}})).unwrap()
    }

    #[test]
    fn a_review_carries_the_output_and_the_policy() {
        let key = v1::CallKey { tool_call_id: "c1".into(), ..Default::default() };
        let request = build(key, &call(), Kind::Review, v1::policy::Source::Name("p".into()), "m", "out");
        let Some(v1::request::Body::Review(review)) = request.body else { panic!("a review body") };
        assert_eq!((review.message.as_str(), review.output.as_str()), ("m", "out"));
        assert_eq!(review.call.unwrap().arguments_json, r#"{"path":"/"}"#);
        assert_eq!(request.policy.unwrap().source, Some(v1::policy::Source::Name("p".into())));
    }

    #[test]
    fn a_label_is_set_on_the_origin_made_if_missing() {
        let key = v1::CallKey { tool_call_id: "c1".into(), ..Default::default() };
        let mut request = build(key, &call(), Kind::Approval, v1::policy::Source::Name("p".into()), "", "");
        label(&mut request, EvalMode::Attack);
        assert_eq!(request.origin.as_ref().map(|o| o.eval_mode.as_str()), Some("attack"));
        request.origin.as_mut().unwrap().run_id = "run".into();
        label(&mut request, EvalMode::Honest);
        let origin = request.origin.unwrap();
        assert_eq!((origin.run_id.as_str(), origin.eval_mode.as_str()), ("run", "honest"));
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_fleet_the_request_fails_closed_at_its_timeout() {
        let request = OneRequest {
            prefix: "t".into(),
            policy: v1::policy::Source::Inline("approvers: []\n".into()),
            kind: Kind::Approval,
            call: call(),
            output: String::new(),
            timeout: Duration::from_secs(2),
            replies: ReplyTrust::Insecure,
            user: "u".into(),
            eval_mode: None,
        };
        let transport = MemoryTransport::new();
        transport.declare(&airlock_transport::Topology::new("t")).await.unwrap();
        let decision = send(transport, request).await.unwrap();
        assert_eq!(decision.decision(), v1::DecisionKind::Reject);
        assert_eq!(decision.approver, crate::TIMEOUT_APPROVER);
        assert!(decision.timed_out, "the runner's own deadline decided");
    }
}
