//! Human tasks and stores for the crate's own tests.

use airlock_contract::v1;

use crate::store::Store;
use crate::task::Incoming;

/// A human task for `sample`/`call` in `pool`, approval unless `review`, with `deadline`.
pub fn human(pool: &str, sample: &str, call: &str, review: bool, deadline: i64) -> Incoming {
    let tool_call = v1::ToolCall {
        id: call.into(),
        function: "bash".into(),
        arguments_json: r#"{"cmd": "rm -r build"}"#.into(),
        r#type: "function".into(),
        ..Default::default()
    };
    let body = if review {
        v1::request::Body::Review(v1::ReviewRequest {
            message: "Cleaning up.".into(),
            call: Some(tool_call),
            output: "removed".into(),
            ..Default::default()
        })
    } else {
        v1::request::Body::Approval(v1::ApprovalRequest {
            message: "Cleaning up.".into(),
            call: Some(tool_call),
            ..Default::default()
        })
    };
    let request = v1::Request {
        key: Some(v1::CallKey { run_id: "run".into(), sample_id: sample.into(), epoch: 1, tool_call_id: call.into() }),
        origin: Some(v1::Origin {
            run_id: "run".into(),
            task: "cleanup".into(),
            sample_id: sample.into(),
            epoch: 1,
            model: "mockllm/model".into(),
            ..Default::default()
        }),
        body: Some(body),
        ..Default::default()
    };
    let task = v1::StepTask {
        request: Some(request),
        step: 2,
        name: "human".into(),
        params_json: "{}".into(),
        deadline_unix_ms: deadline,
        on_timeout: if review { v1::DecisionKind::Terminate.into() } else { v1::DecisionKind::Reject.into() },
        ..Default::default()
    };
    let choices = if review {
        vec![v1::DecisionKind::Continue.into(), v1::DecisionKind::Terminate.into()]
    } else {
        vec![v1::DecisionKind::Approve.into(), v1::DecisionKind::Reject.into(), v1::DecisionKind::Terminate.into()]
    };
    let human = v1::HumanTask { task: Some(task), choices, pool: pool.into() };
    Incoming::decode(&prost::Message::encode_to_vec(&human), pool).expect("a valid task")
}

/// A fresh in-memory SQLite store.
pub async fn memory_store() -> Store {
    Store::open("sqlite::memory:").await.expect("an in-memory store")
}
