//! The worker's own work per message, without the broker: decoding a request, finding its
//! compiled policy, running the chain and encoding the decision for the runner and the audit.
//! The request is the one `airlock bench` sends: an approval of a shell call, padded to about
//! 1.5 KB, carrying its policy inline. The worker is signed and the runner gives its key,
//! so each decision also costs its reply's proof (and the request its digest); the unsigned
//! line beside it shows what that adds.

use std::hint::black_box;

use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _, PublicKeys, RunnerKeys};
use airlock_policy::Kind;
use airlock_transport::{Message, Topology};
use airlock_worker::handler::{Handled, Handler, Inbound};
use airlock_worker::policies::PolicyStore;
use airlock_worker::trust::Trust;
use criterion::{Criterion, criterion_group, criterion_main};
use prost::Message as _;

/// The policy of `airlock bench` (`bench/fleet-policy.yaml`): a pattern and an allow-list
/// escalate, the catch-all approves.
const POLICY: &str = include_str!("../../../bench/fleet-policy.yaml");

fn request(policy: &str) -> v1::Request {
    v1::Request {
        key: Some(v1::CallKey {
            run_id: "measured".into(),
            sample_id: "sample-07".into(),
            epoch: 1,
            tool_call_id: "call-01234".into(),
            ..Default::default()
        }),
        body: Some(v1::request::Body::Approval(v1::ApprovalRequest {
            message: "I will run the training script on the prepared data. ".repeat(20),
            call: Some(v1::ToolCall {
                id: "call".into(),
                function: "bash".into(),
                arguments_json: r#"{"cmd": "python3 train.py --epochs 3 --data /workspace/data"}"#.into(),
                r#type: "function".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        policy: Some(v1::Policy { source: Some(v1::policy::Source::Inline(policy.into())), digest: String::new() }),
        reply_to: "airlock-bench-1.reply.bench-1".into(),
        requested_at_unix_ms: 1_764_000_000_000,
        ..Default::default()
    }
}

fn handler(c: &mut Criterion) {
    let fleet_key = FleetKey::generate().expect("a key");
    let runner = RunnerKeys::new(&fleet_key.public_key().into()).expect("a runner key");
    let trust = Trust::signed(fleet_key, PublicKeys::default());
    let signed = Handler::new(Topology::new("airlock-bench-1"), PolicyStore::new(None), "bench-worker-0", trust);
    let unsigned =
        Handler::new(Topology::new("airlock-bench-1"), PolicyStore::new(None), "bench-worker-0", Trust::insecure());
    let mut asked = request(POLICY);
    asked.runner_key = runner.public().to_vec();
    let message = Message::new(asked.encode_to_vec());
    assert!(
        matches!(signed.handle(&Inbound::request(&message), 1), Handled::Publish(..)),
        "the bench's request is decided"
    );
    c.bench_function("on_request/1.5KB request, 4-step inline policy, signed", |b| {
        b.iter(|| black_box(signed.handle(&Inbound::request(black_box(&message)), 1)))
    });
    c.bench_function("on_request/1.5KB request, 4-step inline policy, unsigned", |b| {
        b.iter(|| black_box(unsigned.handle(&Inbound::request(black_box(&message)), 1)))
    });

    // Resolving an inline policy as big as a real eval's (a long allow-list, many globs).
    let big: String = POLICY.to_owned()
        + &(0..200)
            .map(|i| format!("  - name: auto\n    tools: \"tool_{i}(\"\n    decision: escalate\n"))
            .collect::<String>();
    let store = PolicyStore::new(None);
    let policy = v1::Policy { source: Some(v1::policy::Source::Inline(big.clone())), digest: String::new() };
    store.resolve(Some(&policy), Kind::Approval).expect("compiles");
    c.bench_function(&format!("resolve/inline policy of {} bytes, cached", big.len()), |b| {
        b.iter(|| black_box(store.resolve(black_box(Some(&policy)), Kind::Approval)))
    });
}

criterion_group!(benches, handler);
criterion_main!(benches);
