//! The runner's client on the in-process transport, with the test standing in for the fleet:
//! it takes requests from the requests queue and answers (or forges, repeats, or withholds)
//! replies. Deadlines run on tokio's paused clock.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError, Repeats, ReplyTrust, TIMEOUT_APPROVER};
use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _};
use airlock_transport::{Consumer, Destination, MemoryTransport, Message, Topology, Transport};
use prost::Message as _;

const PREFIX: &str = "t";
const RUNNER: &str = "runner";
/// A queue bound to the cancels exchange, where the test sees the client's cancels.
const OBSERVER: &str = "observer";
/// Long enough that nothing fails closed unless a test lets time run.
const LONG: Duration = Duration::from_secs(3600);
/// Longer than any call waits: what a test waits at most before it fails instead of hanging
/// (on the paused clock, at once).
const GUARD: Duration = Duration::from_secs(7200);

/// The fleet's side of the test: the transport, the requests queue's consumer and the
/// observer of cancels.
struct Fleet {
    transport: MemoryTransport,
    requests: Consumer,
    cancels: Consumer,
}

impl Fleet {
    async fn start() -> Fleet {
        let transport = MemoryTransport::new();
        let topology = Topology::new(PREFIX).with_reply_queue(OBSERVER);
        let topology = topology.clone().with_binding(topology.cancels_exchange(), topology.reply_queue(OBSERVER), "");
        transport.declare(&topology).await.unwrap();
        let requests = transport.consume(&topology.requests_queue(), 0).await.unwrap();
        let cancels = transport.consume(&topology.reply_queue(OBSERVER), 0).await.unwrap();
        Fleet { transport, requests, cancels }
    }

    /// A client that takes only what `fleet_key` proves; with none, one told to run insecure.
    async fn client(&self, fleet_key: Option<&FleetKey>) -> Client<MemoryTransport> {
        let replies = fleet_key.map_or(ReplyTrust::Insecure, |key| ReplyTrust::Proved(key.public_key().into()));
        let config = ClientConfig {
            prefix: PREFIX.into(),
            runner_id: RUNNER.into(),
            default_timeout: LONG,
            replies,
            repeats: Repeats::default(),
        };
        Client::connect(self.transport.clone(), config).await.unwrap()
    }

    /// The next request the client published.
    async fn request(&mut self) -> Asked {
        let delivery = tokio::time::timeout(GUARD, self.requests.next()).await.unwrap().unwrap();
        let (message, acker) = delivery.into_parts();
        acker.ack().await.unwrap();
        let request = v1::Request::decode(message.body.as_ref()).unwrap();
        Asked { request, message }
    }

    /// The next cancel the client published.
    async fn cancel(&mut self) -> v1::Cancel {
        let delivery = tokio::time::timeout(GUARD, self.cancels.next()).await.unwrap().unwrap();
        let (message, acker) = delivery.into_parts();
        acker.ack().await.unwrap();
        v1::Cancel::decode(message.body.as_ref()).unwrap()
    }

    /// Publishes `reply` to the runner's queue under `correlation`.
    async fn reply(&self, correlation: &str, reply: Vec<u8>) {
        let queue = Topology::new(PREFIX).reply_queue(RUNNER);
        let message = Message::new(reply).with_correlation_id(correlation);
        self.transport.publish(&Destination::queue(queue), message).await.unwrap();
    }

    /// Cancels published so far, without waiting for more.
    async fn cancels_published(&self) -> u32 {
        self.transport.message_count(&Topology::new(PREFIX).reply_queue(OBSERVER)).await.unwrap()
    }
}

/// A request as the fleet received it.
struct Asked {
    request: v1::Request,
    message: Message,
}

impl Asked {
    fn correlation(&self) -> &str {
        self.message.correlation_id.as_deref().unwrap()
    }

    fn digest(&self) -> [u8; 32] {
        airlock_integrity::digest(&self.message.body)
    }

    fn decision(&self, approver: &str) -> v1::Decision {
        v1::Decision {
            key: self.request.key.clone(),
            kind: v1::Kind::Approval.into(),
            decision: v1::DecisionKind::Approve.into(),
            approver: approver.into(),
            requested_at_unix_ms: self.request.requested_at_unix_ms,
            ..Default::default()
        }
    }

    /// An unproved reply, as an unsigned fleet sends it.
    fn reply(&self, approver: &str) -> Vec<u8> {
        let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(self.decision(approver))) };
        v1::Reply { body: body.encode_to_vec(), ..Default::default() }.encode_to_vec()
    }

    /// A reply proved with `key` for the request whose digest is `digest`.
    fn proved(&self, key: &FleetKey, digest: &[u8; 32], approver: &str) -> Vec<u8> {
        let body =
            v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(self.decision(approver))) }.encode_to_vec();
        let runner_key: [u8; 32] = self.request.runner_key.as_slice().try_into().unwrap();
        let proof = key.reply_key(&runner_key).unwrap().prove(digest, &body);
        v1::Reply { body, key_id: proof.key_id.as_str().into(), proof: proof.tag.to_vec() }.encode_to_vec()
    }
}

fn approval(call_id: &str) -> v1::Request {
    let call =
        v1::ToolCall { id: call_id.into(), function: "ls".into(), arguments_json: "{}".into(), ..Default::default() };
    v1::Request {
        key: Some(v1::CallKey {
            run_id: "run".into(),
            sample_id: "s".into(),
            epoch: 1,
            tool_call_id: call_id.into(),
            ..Default::default()
        }),
        origin: Some(v1::Origin { eval_id: "eval".into(), ..Default::default() }),
        body: Some(v1::request::Body::Approval(v1::ApprovalRequest { call: Some(call), ..Default::default() })),
        ..Default::default()
    }
}

fn review(call_id: &str) -> v1::Request {
    let mut request = approval(call_id);
    let Some(v1::request::Body::Approval(approval)) = request.body.take() else { unreachable!() };
    let review = v1::ReviewRequest { call: approval.call, output: "out".into(), ..Default::default() };
    request.body = Some(v1::request::Body::Review(review));
    request
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_deadline_fails_closed_and_is_withdrawn() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let started = tokio::time::Instant::now();
    let mut deciding = Box::pin(client.decide(approval("late"), Some(Duration::from_secs(2))));
    assert!(tokio::time::timeout(Duration::from_millis(1990), &mut deciding).await.is_err(), "still waiting");
    assert_eq!(client.stats().pending, 1);
    assert_eq!(fleet.cancels_published().await, 0, "nothing withdrawn before the deadline");

    let decision = tokio::time::timeout(GUARD, deciding).await.expect("failed closed").unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(2), "failed closed at the deadline, not later");
    assert_eq!((decision.decision(), decision.approver.as_str()), (v1::DecisionKind::Reject, TIMEOUT_APPROVER));
    assert_eq!(decision.decided_by, RUNNER);
    assert_eq!(decision.key.as_ref().unwrap().tool_call_id, "late");
    assert_eq!(decision.origin.as_ref().unwrap().eval_id, "eval", "the origin comes back on the decision");
    let asked = fleet.request().await;
    assert_eq!(decision.requested_at_unix_ms, asked.request.requested_at_unix_ms);
    assert!(decision.explanation().contains("within 2.0s, so the runner failed closed and rejected the call"));
    let cancel = fleet.cancel().await;
    assert_eq!((cancel.kind(), cancel.key.unwrap().tool_call_id.as_str()), (v1::Kind::Approval, "late"));

    let decision = tokio::time::timeout(GUARD, client.review(review("late"))).await.expect("failed closed").unwrap();
    assert_eq!(decision.decision(), v1::DecisionKind::Terminate, "a review fails closed by terminating");
    assert_eq!(fleet.cancel().await.kind(), v1::Kind::Review);
    // The review, given the default (long) deadline, was published again three times.
    assert_eq!(client.stats(), airlock_client::ClientStats { timed_out: 2, repeated: 3, ..Default::default() });
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_is_published_again_and_the_first_answer_wins() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    // An answered call teaches the client the fleet's latency: the soft deadline is its floor.
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("quick")).await }
    });
    let asked = fleet.request().await;
    fleet.reply(asked.correlation(), asked.reply("fleet")).await;
    asking.await.unwrap().unwrap();

    let started = tokio::time::Instant::now();
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("held-by-a-silent-worker")).await }
    });
    let first = fleet.request().await;
    let mut copies = Vec::new();
    for _ in 0..2 {
        let copy = fleet.request().await;
        copies.push(started.elapsed());
        assert_eq!(copy.message.body, first.message.body, "the same request, byte for byte");
        assert_eq!(copy.correlation(), first.correlation());
    }
    assert_eq!(copies, [Duration::from_secs(1), Duration::from_secs(3)], "after the soft deadline, then twice it");
    fleet.reply(first.correlation(), first.reply("second-worker")).await;
    assert_eq!(asking.await.unwrap().unwrap().approver, "second-worker");
    // The silent worker's answer comes at last, and is one more duplicate.
    fleet.reply(first.correlation(), first.reply("silent-worker")).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let stats = client.stats();
    assert_eq!((stats.repeated, stats.ignored_replies, stats.pending), (2, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_call_a_step_holds_is_not_published_again() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.decide(approval("monitored"), Some(Duration::from_secs(60))).await }
    });
    let asked = fleet.request().await;
    // As a worker sends it when it hands the call to an external step.
    let progress = v1::Progress { pool: String::new(), task_id: String::new(), step: 1, ..Default::default() };
    let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Progress(progress)) }.encode_to_vec();
    fleet.reply(asked.correlation(), v1::Reply { body, ..Default::default() }.encode_to_vec()).await;
    let decision = asking.await.unwrap().unwrap();
    assert_eq!(decision.approver, TIMEOUT_APPROVER, "it waited for its deadline");
    assert_eq!(client.stats().repeated, 0);
}

#[tokio::test(start_paused = true)]
async fn deadlines_are_kept_in_their_order_whatever_the_order_of_the_calls() {
    let fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let started = tokio::time::Instant::now();
    // The sweeper sleeps towards the first deadline when a call with an earlier one comes.
    let seconds = [30, 10, 20, 5];
    let calls = seconds.map(|s| {
        let client = client.clone();
        tokio::spawn(async move {
            let decision = client.decide(approval(&format!("c{s}")), Some(Duration::from_secs(s))).await.unwrap();
            (decision.approver, started.elapsed())
        })
    });
    for (task, s) in calls.into_iter().zip(seconds) {
        let (approver, elapsed) = tokio::time::timeout(GUARD, task).await.expect("failed closed").unwrap();
        assert_eq!((approver.as_str(), elapsed), (TIMEOUT_APPROVER, Duration::from_secs(s)));
    }
    assert_eq!((client.stats().pending, client.stats().timed_out), (0, 4));
}

#[tokio::test(start_paused = true)]
async fn a_mass_expiry_fails_every_call_closed_and_withdraws_each() {
    let fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    // More than the sweeper fails closed in one go, all due at once; the callers do not
    // even poll until it is over.
    let calls: Vec<_> =
        (0..2500).map(|i| client.decide(approval(&format!("m{i}")), Some(Duration::from_secs(1)))).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!((client.stats().pending, client.stats().timed_out), (0, 2500));
    for call in calls {
        assert_eq!(call.await.unwrap().approver, TIMEOUT_APPROVER);
    }
    let withdrawn = async {
        while fleet.cancels_published().await < 2500 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(GUARD, withdrawn).await.expect("every call withdrawn");
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_stops_waiting_leaves_nothing_behind() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;

    // Dropped while it waits for its reply.
    let mut deciding = Box::pin(client.decide(approval("gone"), Some(Duration::from_secs(5))));
    assert!(tokio::time::timeout(Duration::from_secs(1), &mut deciding).await.is_err());
    let asked = fleet.request().await;
    assert_eq!(client.stats().pending, 1);
    drop(deciding);
    assert_eq!(client.stats().pending, 0, "the entry went with its caller");

    // Dropped before it was ever polled: the call was registered, and is forgotten too.
    let never_polled = client.decide(approval("never"), Some(Duration::from_secs(5)));
    assert_eq!(client.stats().pending, 1);
    drop(never_polled);
    assert_eq!(client.stats().pending, 0);

    // Past the deadlines nothing fails closed (nobody waits), and the reply that comes finds
    // nothing.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(client.stats().timed_out, 0);
    fleet.reply(asked.correlation(), asked.reply("auto")).await;
    // The same key asked again is a new call, answered on its own.
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.decide(approval("gone"), None).await }
    });
    let again = fleet.request().await;
    fleet.reply(again.correlation(), again.reply("second")).await;
    assert_eq!(asking.await.unwrap().unwrap().approver, "second");
    assert_eq!(client.stats(), airlock_client::ClientStats { ignored_replies: 1, ..Default::default() });
}

#[tokio::test]
async fn replies_go_to_their_own_calls_and_duplicates_or_late_ones_are_ignored() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let ask = |id: &'static str| {
        let client = client.clone();
        tokio::spawn(async move { client.approve(approval(id)).await })
    };
    let (first, second) = (ask("a"), ask("b"));
    let (x, y) = (fleet.request().await, fleet.request().await);
    assert_ne!(x.correlation(), y.correlation());
    // Answered in the other order, each by its own approver.
    fleet.reply(y.correlation(), y.reply(y.request.key.as_ref().unwrap().tool_call_id.as_str())).await;
    fleet.reply(x.correlation(), x.reply(x.request.key.as_ref().unwrap().tool_call_id.as_str())).await;
    assert_eq!(first.await.unwrap().unwrap().approver, "a");
    assert_eq!(second.await.unwrap().unwrap().approver, "b");

    // The same reply again, and a reply for a call nobody made: both ignored.
    fleet.reply(x.correlation(), x.reply("again")).await;
    fleet.reply("approval/run/s/1/nobody", x.reply("stray")).await;
    let waiting = ask("c");
    let z = fleet.request().await;
    fleet.reply(z.correlation(), z.reply("c")).await;
    assert_eq!(waiting.await.unwrap().unwrap().approver, "c", "replies are read in order: the two came first");
    assert_eq!(client.stats(), airlock_client::ClientStats { ignored_replies: 2, ..Default::default() });
}

#[tokio::test]
async fn a_second_call_with_the_same_key_is_refused_while_the_first_waits() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("dup")).await }
    });
    let asked = fleet.request().await;
    let refused = client.approve(approval("dup")).await;
    assert!(matches!(&refused, Err(ClientError::AlreadyPending(id)) if id == asked.correlation()), "{refused:?}");
    // The review of the same call is another key.
    let review = tokio::spawn({
        let client = client.clone();
        async move { client.review(review("dup")).await }
    });
    let reviewed = fleet.request().await;
    assert_ne!(reviewed.correlation(), asked.correlation());
    fleet.reply(asked.correlation(), asked.reply("auto")).await;
    assert_eq!(first.await.unwrap().unwrap().approver, "auto");
    assert_eq!(client.stats().pending, 1, "the refused duplicate took nothing from the first call");
    client.close().await;
    assert!(matches!(review.await.unwrap(), Err(ClientError::Closed)));
}

#[tokio::test]
async fn replies_without_a_proof_for_the_very_request_are_dropped_while_it_waits() {
    let fleet_key = FleetKey::generate().unwrap();
    let mut fleet = Fleet::start().await;
    let client = fleet.client(Some(&fleet_key)).await;
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("signed")).await }
    });
    let asked = fleet.request().await;
    assert_eq!(asked.request.runner_key.len(), 32, "the request carries the runner's key");

    let forger = FleetKey::generate().unwrap();
    let forged = [
        // Unproved, as from an unsigned fleet.
        asked.reply("unproved"),
        // Proved with a key the runner does not trust.
        asked.proved(&forger, &asked.digest(), "forger"),
        // Proved with the fleet's key, but for another request (a replay).
        asked.proved(&fleet_key, &[7; 32], "replayed"),
        // Not a reply at all.
        b"\x0a\xff\xff garbage".to_vec(),
    ];
    for (sent, reply) in forged.into_iter().enumerate() {
        fleet.reply(asked.correlation(), reply).await;
        // Judged by the reader (as rejected, or the call would have ended).
        let judged = async {
            while client.stats().rejected_replies < sent as u64 + 1 && !asking.is_finished() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), judged).await.expect("the reply was read");
        assert!(!asking.is_finished(), "forged reply {sent} was taken: {:?}", client.stats());
        assert_eq!(client.stats().pending, 1, "still waiting after forged reply {sent}");
    }
    fleet.reply(asked.correlation(), asked.proved(&fleet_key, &asked.digest(), "fleet")).await;
    assert_eq!(asking.await.unwrap().unwrap().approver, "fleet");
    assert_eq!(client.stats(), airlock_client::ClientStats { rejected_replies: 4, ..Default::default() });
}

#[tokio::test]
async fn a_progress_never_settles_a_call_whoever_sends_it() {
    let fleet_key = FleetKey::generate().unwrap();
    let mut fleet = Fleet::start().await;
    for signed in [true, false] {
        let client = fleet.client(signed.then_some(&fleet_key)).await;
        let asking = tokio::spawn({
            let client = client.clone();
            async move { client.approve(approval("waits")).await }
        });
        let asked = fleet.request().await;
        let progress = v1::Progress { pool: "ops".into(), task_id: "t-1".into(), step: 0, ..Default::default() };
        let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Progress(progress)) }.encode_to_vec();
        let forged = [
            // As a reviewer service sends it: no proof.
            v1::Reply { body: body.clone(), ..Default::default() },
            // Dressed up with a proof that holds for nothing.
            v1::Reply { body, key_id: "0011223344556677".into(), proof: vec![9; 32] },
        ];
        for reply in forged {
            fleet.reply(asked.correlation(), reply.encode_to_vec()).await;
        }
        // Replies are read in order: the decision after the progresses is the one taken.
        let decision = if signed { asked.proved(&fleet_key, &asked.digest(), "fleet") } else { asked.reply("fleet") };
        fleet.reply(asked.correlation(), decision).await;
        assert_eq!(asking.await.unwrap().unwrap().approver, "fleet");
        assert_eq!(client.stats(), airlock_client::ClientStats { progress_replies: 2, ..Default::default() });
        client.close().await;
    }
}

#[tokio::test]
async fn a_refusal_reaches_its_caller_as_an_error() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("bad")).await }
    });
    let asked = fleet.request().await;
    let error = v1::Error { code: "bad_policy".into(), message: "no such policy".into(), ..Default::default() };
    let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Error(error)) }.encode_to_vec();
    fleet.reply(asked.correlation(), v1::Reply { body, ..Default::default() }.encode_to_vec()).await;
    let refused = asking.await.unwrap();
    assert!(matches!(&refused, Err(ClientError::Refused { code, .. }) if code == "bad_policy"), "{refused:?}");
}

#[tokio::test]
async fn pending_requests_are_sent_again_byte_for_byte() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let asking: Vec<_> = ["r1", "r2"]
        .into_iter()
        .map(|id| {
            let client = client.clone();
            tokio::spawn(async move { client.approve(approval(id)).await })
        })
        .collect();
    let first = [fleet.request().await, fleet.request().await];
    assert_eq!(client.resend_pending().await.unwrap(), 2);
    for _ in 0..2 {
        let again = fleet.request().await;
        let original = first.iter().find(|asked| asked.correlation() == again.correlation()).unwrap();
        assert_eq!(again.message.body, original.message.body);
        assert_eq!(again.message.reply_to.as_deref(), Some(client.reply_queue()));
    }
    // Both copies answered: one decision each, the second reply ignored.
    for asked in first.iter().chain(first.iter()) {
        fleet.reply(asked.correlation(), asked.reply("auto")).await;
    }
    for task in asking {
        assert_eq!(task.await.unwrap().unwrap().approver, "auto");
    }
    assert_eq!(client.stats().ignored_replies, 2);
}

#[tokio::test]
async fn closing_fails_the_waiting_calls_and_refuses_new_ones() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("open")).await }
    });
    fleet.request().await;
    client.close().await;
    assert!(matches!(asking.await.unwrap(), Err(ClientError::Closed)));
    assert!(matches!(client.approve(approval("after")).await, Err(ClientError::Closed)));
    assert_eq!(client.stats().pending, 0);
}

#[tokio::test]
async fn a_waiting_call_costs_its_caller_a_small_future() {
    let fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let deciding = client.decide(approval("small"), None);
    // What a caller holds per waiting call (the entry of the client's table aside); it was
    // 5.6 KB when each call kept its own request, timer and publish.
    let size = std::mem::size_of_val(&deciding);
    assert!(size <= 128, "a decide future is {size} bytes");
}

#[tokio::test]
async fn a_decision_about_an_earlier_request_for_the_call_is_ignored_even_when_proved() {
    let fleet_key = FleetKey::generate().unwrap();
    let mut fleet = Fleet::start().await;
    let client = fleet.client(Some(&fleet_key)).await;
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("reused")).await }
    });
    let asked = fleet.request().await;
    let stale = v1::Decision { requested_at_unix_ms: 1, ..asked.decision("earlier") };
    let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(stale)) }.encode_to_vec();
    let runner_key: [u8; 32] = asked.request.runner_key.as_slice().try_into().unwrap();
    let proof = fleet_key.reply_key(&runner_key).unwrap().prove(&asked.digest(), &body);
    let reply = v1::Reply { body, key_id: proof.key_id.as_str().into(), proof: proof.tag.to_vec() };
    fleet.reply(asked.correlation(), reply.encode_to_vec()).await;
    fleet.reply(asked.correlation(), asked.proved(&fleet_key, &asked.digest(), "fleet")).await;
    assert_eq!(asking.await.unwrap().unwrap().approver, "fleet", "the stale one settled nothing");
    assert_eq!(client.stats(), airlock_client::ClientStats { ignored_replies: 1, ..Default::default() });
}

#[tokio::test]
async fn each_progress_to_a_waiting_call_reaches_the_hook_with_its_correlation_id() {
    let mut fleet = Fleet::start().await;
    let client = fleet.client(None).await;
    let (told, mut heard) = tokio::sync::mpsc::unbounded_channel();
    assert!(client.on_progress(Box::new(move |correlation, progress| {
        told.send((correlation.to_owned(), progress.task_id.clone())).unwrap();
    })));
    assert!(!client.on_progress(Box::new(|_, _| {})), "set once");
    let asking = tokio::spawn({
        let client = client.clone();
        async move { client.approve(approval("waits")).await }
    });
    let asked = fleet.request().await;
    let progress = v1::Progress { pool: "ops".into(), task_id: "t-1".into(), step: 0, ..Default::default() };
    let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Progress(progress)) }.encode_to_vec();
    fleet.reply(asked.correlation(), v1::Reply { body: body.clone(), ..Default::default() }.encode_to_vec()).await;
    fleet.reply("approval/nobody/s/1/x", v1::Reply { body, ..Default::default() }.encode_to_vec()).await;
    fleet.reply(asked.correlation(), asked.reply("fleet")).await;
    assert_eq!(asking.await.unwrap().unwrap().approver, "fleet");
    assert_eq!(heard.recv().await, Some((asked.correlation().to_owned(), "t-1".to_owned())));
    assert!(heard.try_recv().is_err(), "nothing for a call that does not wait");
}

#[tokio::test]
async fn a_runner_that_declares_only_its_own_queue_needs_the_fleet_there_first() {
    let config = || ClientConfig {
        prefix: "elsewhere".into(),
        runner_id: RUNNER.into(),
        default_timeout: LONG,
        replies: ReplyTrust::Insecure,
        repeats: Repeats::default(),
    };
    let transport = MemoryTransport::new();
    match Client::connect_own(transport.clone(), config()).await {
        Err(ClientError::Transport(airlock_transport::TransportError::NotFound { what })) => {
            assert_eq!(what, "exchange elsewhere.route");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    transport.declare(&Topology::new("elsewhere")).await.unwrap();
    let client = Client::connect_own(transport.clone(), config()).await.unwrap();
    assert_eq!(client.reply_queue(), "elsewhere.reply.runner");
}

#[tokio::test]
async fn a_runner_with_no_fleet_key_to_prove_replies_with_does_not_start() {
    let fleet = Fleet::start().await;
    let config = ClientConfig {
        prefix: PREFIX.into(),
        runner_id: RUNNER.into(),
        default_timeout: LONG,
        replies: ReplyTrust::Proved(Default::default()),
        repeats: Repeats::default(),
    };
    match Client::connect(fleet.transport.clone(), config).await {
        Err(e @ ClientError::NoFleetKey) => assert!(e.to_string().contains("fleet.pub"), "{e}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let reply_queue = Topology::empty(PREFIX).reply_queue(RUNNER);
    assert!(fleet.transport.consume(&reply_queue, 0).await.is_err(), "no reply queue was made");
}
