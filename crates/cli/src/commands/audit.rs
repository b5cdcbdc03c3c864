//! `airlock audit`: the decision log. Every final decision the workers publish to the
//! decisions exchange is written as one JSON line, exactly once, with the argument keys the
//! operator names masked; `airlock audit query` answers the common questions from the file.
//!
//! The log's queue `<p>.audit` is durable and bound to every decision, so decisions made
//! while the auditor is down wait for it. A line is written and flushed before its message
//! is acknowledged; a redelivered decision whose id is already in the file is not written
//! again.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use airlock_contract::v1;
use airlock_transport::{Topology, Transport};
use clap::{Args, Subcommand};
use prost::Message as _;
use serde_json::{Value, json};

use super::request::decision_json;
use super::{Failure, FleetArgs, connect, shutdown_signal};

/// The queue the auditor reads, after the prefix.
const AUDIT_QUEUE: &str = "audit";

/// What a masked value reads as.
const MASK: &str = "***";

/// The decision log.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Write every decision of the fleet to a JSONL file, until SIGTERM or SIGINT.
    Log(LogArgs),
    /// Print the records of a decision log that match every filter given.
    Query(QueryArgs),
}

/// Arguments of `airlock audit log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    /// The JSONL file to append to.
    #[arg(long)]
    out: PathBuf,
    /// Argument and metadata keys whose values are replaced by `***` (e.g. password,token).
    #[arg(long, value_delimiter = ',')]
    mask: Vec<String>,
}

/// Arguments of `airlock audit query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The decision log.
    #[arg(long)]
    file: PathBuf,
    /// Decisions of this sample.
    #[arg(long)]
    sample: Option<String>,
    /// Decisions of this run.
    #[arg(long)]
    run: Option<String>,
    /// Decisions made by this reviewer (or worker, plugin, …).
    #[arg(long)]
    decided_by: Option<String>,
    /// Decisions made under this policy digest.
    #[arg(long)]
    digest: Option<String>,
}

/// Runs an audit subcommand.
pub async fn run(command: AuditCommand) -> Result<(), Failure> {
    match command {
        AuditCommand::Log(args) => log(args).await,
        AuditCommand::Query(args) => query(&args),
    }
}

async fn log(args: LogArgs) -> Result<(), Failure> {
    let mut seen = recorded_ids(&args.out)?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .map_err(|e| Failure::config(format!("{}: {e}", args.out.display())))?;
    let transport = connect(&args.fleet, "audit").await?;
    let fleet = Topology::new(args.fleet.prefix.clone());
    let queue = fleet.name(AUDIT_QUEUE);
    let topology =
        fleet.clone().with_work_queue(AUDIT_QUEUE).with_binding(fleet.decisions_exchange(), queue.clone(), "#");
    transport.declare(&topology).await.map_err(|e| Failure::other(format!("declaring {queue}: {e}")))?;
    let mut decisions = transport.consume(&queue, 256).await.map_err(|e| Failure::other(e.to_string()))?;
    eprintln!("Writing the decisions of '{}' to {}.", args.fleet.prefix, args.out.display());
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let delivery = tokio::select! {
            () = &mut stop => break,
            delivery = decisions.next() => match delivery {
                Some(delivery) => delivery,
                None => break,
            },
        };
        let Ok(decision) = v1::Decision::decode(delivery.message.body.as_ref()) else {
            let _ = transport.publish_dead(&topology, delivery, "bad_message: not an airlock.v1.Decision").await;
            continue;
        };
        if seen.insert(decision.decision_id.clone()) {
            let line = record(&decision, &args.mask).to_string();
            writeln!(file, "{line}")
                .and_then(|()| file.flush())
                .map_err(|e| Failure::other(format!("{}: {e}", args.out.display())))?;
        }
        let _ = delivery.ack().await;
    }
    decisions.cancel().await;
    transport.close().await;
    Ok(())
}

/// One decision as a log record: the decision as `airlock request` prints it, with its
/// call key, kind and origin, and masked values.
pub fn record(decision: &v1::Decision, mask: &[String]) -> Value {
    let mut out = decision_json(decision);
    let key = decision.key.clone().unwrap_or_default();
    let origin = decision.origin.clone().unwrap_or_default();
    out["kind"] = json!(if decision.kind() == v1::Kind::Review { "review" } else { "approval" });
    out["key"] = json!({ "run_id": key.run_id, "sample_id": key.sample_id, "epoch": key.epoch, "tool_call_id": key.tool_call_id });
    out["origin"] = json!({
        "run_id": origin.run_id, "eval_id": origin.eval_id, "task": origin.task, "sample_id": origin.sample_id,
        "epoch": origin.epoch, "model": origin.model, "runner_id": origin.runner_id,
    });
    mask_keys(&mut out, mask);
    out
}

/// Replaces the value of every object key in `mask`, at any depth.
fn mask_keys(value: &mut Value, mask: &[String]) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if mask.iter().any(|m| m == key) {
                    *inner = Value::String(MASK.into());
                } else {
                    mask_keys(inner, mask);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| mask_keys(item, mask)),
        _ => {}
    }
}

/// The decision ids already in the log, so a redelivered decision is not written twice.
fn recorded_ids(path: &Path) -> Result<HashSet<String>, Failure> {
    let Ok(file) = File::open(path) else { return Ok(HashSet::new()) };
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .filter_map(|record| record["decision_id"].as_str().map(str::to_owned))
        .collect())
}

fn query(args: &QueryArgs) -> Result<(), Failure> {
    let text = fs::read_to_string(&args.file).map_err(|e| Failure::config(format!("{}: {e}", args.file.display())))?;
    let wanted = |record: &Value, pointer: &str, value: &Option<String>| {
        value.as_ref().is_none_or(|v| record.pointer(pointer).and_then(Value::as_str) == Some(v))
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let record: Value = serde_json::from_str(line).map_err(|e| Failure::other(format!("a bad record: {e}")))?;
        let decided_by_any = args.decided_by.as_ref().is_none_or(|who| {
            record["decided_by"] == who.as_str()
                || record["trail"].as_array().is_some_and(|t| t.iter().any(|e| e["decided_by"] == who.as_str()))
        });
        if wanted(&record, "/key/sample_id", &args.sample)
            && wanted(&record, "/key/run_id", &args.run)
            && wanted(&record, "/policy_digest", &args.digest)
            && decided_by_any
        {
            println!("{line}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keys_at_any_depth() {
        let mut value =
            json!({"modified": {"arguments": {"password": "hunter2", "cmd": "ls", "env": [{"token": "t"}]}}});
        mask_keys(&mut value, &["password".into(), "token".into()]);
        assert_eq!(
            value,
            json!({"modified": {"arguments": {"password": "***", "cmd": "ls", "env": [{"token": "***"}]}}})
        );
    }
}
