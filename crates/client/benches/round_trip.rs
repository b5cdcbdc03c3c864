//! The runner's own work per round trip, without the broker: 64 approval requests of about
//! 1.5 KB in flight through one client on the in-process transport, each answered by a
//! responder task as soon as it arrives. One iteration is one call from `decide` to its
//! decision: the client's submitting, publishing, reading and matching the reply, plus what
//! the in-process transport and the responder (decode the request, encode the reply, prove
//! it when signed) cost, which is the same whatever the client does. The signed line is a
//! runner that checks every reply's proof against its request's digest.
//!
//! Over RabbitMQ the runner's CPU per round trip is dominated by lapin's I/O threads;
//! `airlock bench` reports it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use airlock_client::{Client, ClientConfig, Repeats, ReplyTrust};
use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _, ReplyKey};
use airlock_transport::{Destination, MemoryTransport, Message, Topology, Transport};
use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use prost::Message as _;

const PREFIX: &str = "bench";
const IN_FLIGHT: u64 = 64;

/// Call ids never repeat across iterations.
static NEXT_CALL: AtomicU64 = AtomicU64::new(0);

fn request() -> v1::Request {
    let call = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
    v1::Request {
        key: Some(v1::CallKey {
            run_id: "measured".into(),
            sample_id: format!("sample-{:02}", call % 64),
            epoch: 1,
            tool_call_id: format!("call-{call:05}"),
            ..Default::default()
        }),
        body: Some(v1::request::Body::Approval(v1::ApprovalRequest {
            message: "I will run the training script on the prepared data. ".repeat(24),
            call: Some(v1::ToolCall {
                id: "call".into(),
                function: "bash".into(),
                arguments_json: r#"{"cmd": "python3 train.py --epochs 3 --data /workspace/data"}"#.into(),
                r#type: "function".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        policy: Some(v1::Policy { source: Some(v1::policy::Source::Name("bench".into())), digest: String::new() }),
        ..Default::default()
    }
}

/// Answers every request on the requests queue with an approval, proved with `fleet_key`
/// when given (the reply key agreed once, as a worker keeps it per runner).
async fn respond(transport: MemoryTransport, fleet_key: Option<FleetKey>) {
    let mut requests = transport.consume(&Topology::new(PREFIX).requests_queue(), 0).await.expect("a consumer");
    let mut reply_key: Option<ReplyKey> = None;
    while let Some(delivery) = requests.next().await {
        let (message, acker) = delivery.into_parts();
        let request = v1::Request::decode(message.body.as_ref()).expect("a request");
        let decision = v1::Decision {
            key: request.key,
            decision: v1::DecisionKind::Approve.into(),
            approver: "auto".into(),
            ..Default::default()
        };
        let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(decision)) }.encode_to_vec();
        let reply = match &fleet_key {
            Some(fleet_key) => {
                let key = reply_key.get_or_insert_with(|| {
                    let runner: [u8; 32] = request.runner_key.as_slice().try_into().expect("a runner key");
                    fleet_key.reply_key(&runner).expect("a reply key")
                });
                let proof = key.prove(&airlock_integrity::digest(&message.body), &body);
                v1::Reply { body, key_id: proof.key_id.as_str().into(), proof: proof.tag.to_vec() }
            }
            None => v1::Reply { body, ..Default::default() },
        };
        let mut answer = Message::new(reply.encode_to_vec());
        answer.correlation_id = message.correlation_id;
        let reply_to = Destination::queue(message.reply_to.expect("a reply queue"));
        transport.publish(&reply_to, answer).await.expect("a reply");
        acker.ack().await.expect("an ack");
    }
}

/// `iterations` calls, [`IN_FLIGHT`] at a time; how long they took.
async fn round_trips(client: &Client<MemoryTransport>, iterations: u64) -> Duration {
    let started = Instant::now();
    let mut in_flight = FuturesUnordered::new();
    let mut sent = 0;
    while sent < iterations.min(IN_FLIGHT) {
        in_flight.push(client.decide(request(), None));
        sent += 1;
    }
    while let Some(decided) = in_flight.next().await {
        assert_eq!(decided.expect("a decision").approver, "auto");
        if sent < iterations {
            in_flight.push(client.decide(request(), None));
            sent += 1;
        }
    }
    started.elapsed()
}

fn client(c: &mut Criterion) {
    let mut group = c.benchmark_group("round_trip");
    for signed in [false, true] {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let fleet_key = signed.then(|| FleetKey::generate().expect("a key"));
        let client = runtime.block_on(async {
            let transport = MemoryTransport::new();
            let config = ClientConfig {
                prefix: PREFIX.into(),
                runner_id: "runner".into(),
                default_timeout: Duration::from_secs(60),
                replies: fleet_key
                    .as_ref()
                    .map_or(ReplyTrust::Insecure, |key| ReplyTrust::Proved(key.public_key().into())),
                repeats: Repeats::default(),
            };
            let client = Client::connect(transport.clone(), config).await.expect("a client");
            tokio::spawn(respond(transport, fleet_key));
            client
        });
        let name = if signed { "signed, 64 in flight" } else { "unsigned, 64 in flight" };
        group.bench_function(name, |b| b.iter_custom(|iterations| runtime.block_on(round_trips(&client, iterations))));
    }
    group.finish();
}

criterion_group!(benches, client);
criterion_main!(benches);
