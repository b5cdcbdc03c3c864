//! A runner's load for the fault suites: approvals sent without pause, a window at a time,
//! each answered or failed closed at its own deadline, every outcome kept for the checks.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_client::Client;
use airlock_transport::Transport;
use serde_json::json;
use tokio::task::JoinSet;

use crate::{HANG_GUARD, approval, decision_name};

/// What one call of a [`Load`] ended with.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The call's id.
    pub call: String,
    /// The decision's name (`approve`, or `reject` when it failed closed).
    pub decision: &'static str,
    /// The approver that decided (`timeout` when it failed closed).
    pub approver: String,
    /// Who decided: a worker's id, a person, `runner` for a call failed closed.
    pub decided_by: String,
}

/// Approvals of the calls `call` makes of each call's id (Inspect ToolCall JSON) under
/// `policy`, `window` in flight, `count` in all, each with the client's default deadline.
pub struct Load {
    answered: Arc<AtomicUsize>,
    running: tokio::task::JoinHandle<Vec<Outcome>>,
}

impl Load {
    /// Starts sending.
    pub fn start<T: Transport>(
        client: &Client<T>,
        policy: &'static str,
        call: fn(&str) -> serde_json::Value,
        window: usize,
        count: usize,
    ) -> Load {
        let answered = Arc::new(AtomicUsize::new(0));
        let (client, counter) = (client.clone(), answered.clone());
        let running = tokio::spawn(async move {
            let mut calls = JoinSet::new();
            let mut outcomes = Vec::with_capacity(count);
            let mut sent = 0;
            loop {
                while calls.len() < window && sent < count {
                    let (client, counter) = (client.clone(), counter.clone());
                    let id = format!("call-{sent}");
                    calls.spawn(async move {
                        let request = approval("load", &id, call(&id), policy);
                        let decision = client.approve(request).await.expect("a decision or a fail-closed one");
                        counter.fetch_add(1, Ordering::Relaxed);
                        Outcome {
                            call: decision.key.as_ref().map(|key| key.tool_call_id.clone()).unwrap_or_default(),
                            decision: decision_name(&decision),
                            approver: decision.approver,
                            decided_by: decision.decided_by,
                        }
                    });
                    sent += 1;
                }
                match calls.join_next().await {
                    Some(outcome) => outcomes.push(outcome.expect("a call")),
                    None => return outcomes,
                }
            }
        });
        Load { answered, running }
    }

    /// How many calls were answered so far.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }

    /// Waits until at least `count` calls were answered in all.
    pub async fn until(&self, count: usize) {
        tokio::time::timeout(HANG_GUARD, async {
            while self.answered() < count {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the load stalled at {} answers", self.answered()));
    }

    /// Waits for every call; checks that each got one answer and returns them.
    pub async fn finish(self) -> Vec<Outcome> {
        let outcomes = tokio::time::timeout(HANG_GUARD, self.running).await.expect("the load ended").expect("it ran");
        let calls: HashSet<&str> = outcomes.iter().map(|outcome| outcome.call.as_str()).collect();
        assert_eq!(calls.len(), outcomes.len(), "one answer per call");
        outcomes
    }
}

/// An `ls` call that names its id: what a built-in `auto` step approves.
pub fn ls(call: &str) -> serde_json::Value {
    json!({"function": "ls", "arguments": {"call": call}})
}

/// The calls of `outcomes` that were not approved by a worker (failed closed, or anything
/// else), for an assertion's message.
pub fn not_approved(outcomes: &[Outcome]) -> Vec<&Outcome> {
    outcomes.iter().filter(|outcome| outcome.decision != "approve").collect()
}
