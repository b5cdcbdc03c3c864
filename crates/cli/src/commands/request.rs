//! `airlock request`: the `curl` of Airlock. One request through the fleet, its decision as
//! one JSON object on stdout. A reject is an answer, not a failure: the exit status is
//! non-zero only for bad usage, an unreachable broker, or a request the fleet refused.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError};
use airlock_contract::v1;
use airlock_policy::{Call, Kind};
use airlock_transport::Transport;
use clap::Args;
use serde_json::{Value, json};

use super::{Failure, FleetArgs, connect};

/// Arguments of `airlock request`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    /// The Inspect policy file, sent with the request.
    #[arg(long, conflicts_with = "policy_name", required_unless_present = "policy_name")]
    policy: Option<PathBuf>,
    /// Or the name of a policy the workers hold in their --policy-dir.
    #[arg(long)]
    policy_name: Option<String>,
    /// Which chain to run.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(["approval", "review"]))]
    kind: String,
    /// The call: Inspect's ToolCall JSON.
    #[arg(long)]
    call: PathBuf,
    /// For a review: the tool's output.
    #[arg(long, default_value = "")]
    output: String,
    /// Seconds to wait before failing closed.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
}

/// Sends the request and prints the decision.
pub async fn run(args: RequestArgs) -> Result<(), Failure> {
    let kind: Kind = args.kind.parse().map_err(Failure::config)?;
    let policy = match (&args.policy, &args.policy_name) {
        (Some(file), _) => v1::policy::Source::Inline(
            fs::read_to_string(file).map_err(|e| Failure::config(format!("{}: {e}", file.display())))?,
        ),
        (None, Some(name)) => v1::policy::Source::Name(name.clone()),
        (None, None) => unreachable!("clap requires --policy or --policy-name"),
    };
    let text = fs::read_to_string(&args.call).map_err(|e| Failure::config(format!("{}: {e}", args.call.display())))?;
    let call = serde_json::from_str::<Value>(&text)
        .map_err(|e| e.to_string())
        .and_then(|v| Call::from_json(&v).map_err(|e| e.to_string()))
        .map_err(|e| Failure::config(format!("{}: {e}", args.call.display())))?;
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(Failure::config("--timeout must be a positive number of seconds"));
    }

    let transport = connect(&args.fleet, "request").await?;
    let runner_id = format!("request-{}", uuid::Uuid::now_v7());
    let config = ClientConfig {
        prefix: args.fleet.prefix.clone(),
        runner_id: runner_id.clone(),
        default_timeout: Duration::from_secs_f64(args.timeout),
    };
    let client = Client::connect(transport.clone(), config).await.map_err(|e| Failure::other(e.to_string()))?;
    let key = v1::CallKey { run_id: runner_id, sample_id: "request".into(), epoch: 1, tool_call_id: call.id.clone() };
    let request = build_request(key, &call, kind, policy, "", &args.output);
    let result = client.decide(request, None).await;
    client.close().await;
    transport.close().await;
    match result {
        Ok(decision) => {
            println!("{}", decision_json(&decision));
            Ok(())
        }
        Err(ClientError::Refused { code, message }) => {
            println!("{}", json!({ "error": { "code": code, "message": message } }));
            Err(Failure::other(format!("the fleet refused the request ({code})")))
        }
        Err(e) => Err(Failure::other(e.to_string())),
    }
}

/// A request for one call, ready for the client (which fills the deadline and reply queue).
pub fn build_request(
    key: v1::CallKey,
    call: &Call,
    kind: Kind,
    policy: v1::policy::Source,
    message: &str,
    output: &str,
) -> v1::Request {
    let wire_call = airlock_records::convert::call_to_wire(call);
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

/// A decision as the JSON object `airlock request` prints.
pub fn decision_json(decision: &v1::Decision) -> Value {
    let name = |d: i32| airlock_records::convert::decision_from_wire(d).map_or("unspecified", |d| d.as_str());
    let object = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    let mut out = json!({
        "decision": name(decision.decision),
        "explanation": decision.explanation,
        "approver": (!decision.approver.is_empty()).then_some(&decision.approver),
        "step": decision.step,
        "trail": decision.trail.iter().map(|t| {
            let mut entry = json!({
                "approver": t.approver,
                "decision": name(t.decision),
                "explanation": t.explanation,
                "decided_by": t.decided_by,
            });
            // A monitor's score and reason: what `airlock monitor calibrate` reads.
            if !t.metadata_json.is_empty() {
                entry["metadata"] = object(&t.metadata_json);
            }
            entry
        }).collect::<Vec<_>>(),
        "decided_by": decision.decided_by,
        "decision_id": decision.decision_id,
        "policy_digest": decision.policy_digest,
        "requested_at_unix_ms": decision.requested_at_unix_ms,
        "decided_at_unix_ms": decision.decided_at_unix_ms,
    });
    if let Some(modified) = &decision.modified {
        out["modified"] = json!({ "function": modified.function, "arguments": object(&modified.arguments_json) });
    }
    if !decision.metadata_json.is_empty() {
        out["metadata"] = object(&decision.metadata_json);
    }
    out
}
