//! The reviewer service over RabbitMQ with a real worker and runner: human steps answered
//! through the HTTP API, deadlines, cancels, duplicates, a restart with tasks pending, and the
//! progress that tells a runner its call waits for a person; browser sessions across a
//! restart and across services sharing a PostgreSQL store; the per-pool metrics.

use std::time::Duration;

use airlock_client::Client;
use airlock_contract::v1;
use airlock_records::review::{Settled, TaskState};
use airlock_reviewer::auth::{SESSION_COOKIE, sha256_hex};
use airlock_reviewer::client::{ApiClient, RequestError, request};
use airlock_reviewer::store::{Decided, Delivery, Recording, Store, StoredSession};
use airlock_reviewer::task::Verdict;
use airlock_reviewer::{ReviewerConfig, Service};
use airlock_testkit::database::with_pg;
use airlock_testkit::unique_prefix;
use airlock_tests::{
    HANG_GUARD, InProcessWorker, REVIEWER_TOKEN, TestKeys, approval, broker, decision_name, guarded, pending, review,
    reviewer_config, runner,
};
use airlock_transport::{AmqpTransport, Destination, Message, Topology, Transport};
use serde_json::json;
use tokio::io::AsyncReadExt as _;

const INSTANCE: &str = "reviewer-test";

const POLICY: &str = r#"
approvers:
  - name: human
    tools: "bash"
    pool: ops
  - name: human
    tools: "deploy"
    pool: ops
    timeout: 1
    on_timeout: reject
reviewers:
  - name: human
    tools: "bash"
    pool: ops
"#;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_human_pool("ops").with_reply_queue("runner").with_reply_queue(INSTANCE)
}

fn temp_store() -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("airlock-reviewer-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("tasks.db").display());
    (dir, url)
}

struct Fleet {
    client: Client<AmqpTransport>,
    worker: InProcessWorker,
}

async fn start_fleet(transport: &AmqpTransport, prefix: &str) -> Fleet {
    transport.declare(&fleet(prefix)).await.unwrap();
    let worker = InProcessWorker::start(transport.clone(), prefix, "worker", 16);
    let client = runner(transport.clone(), prefix, Duration::from_secs(100)).await;
    Fleet { client, worker }
}

impl Fleet {
    async fn stop(self) {
        self.client.close().await;
        self.worker.stop().await;
    }
}

/// Waits until `queue` holds no message, ready or unacknowledged.
async fn drained(queue: &str) {
    loop {
        let listing =
            airlock_testkit::rabbitmqctl(&["list_queues", "-q", "--no-table-headers", "name", "messages"]).await;
        if airlock_testkit::queue_figure(&listing, queue) == Some(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn bash(cmd: &str) -> serde_json::Value {
    json!({"function": "bash", "arguments": {"cmd": cmd}})
}

#[tokio::test]
async fn human_steps_are_answered_through_the_api() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let (dir, store) = temp_store();
        let fleet = start_fleet(&transport, &prefix).await;
        let service = Service::start(transport.clone(), reviewer_config(&prefix, &store, INSTANCE)).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);

        // An approval escalated to a person.
        let client = fleet.client.clone();
        let asked =
            tokio::spawn(async move { client.approve(approval("s1", "c1", bash("rm -r build"), POLICY)).await });
        let task = pending(&api, 1).await.remove(0);
        assert_eq!((task["kind"].as_str(), task["pool"].as_str()), (Some("approval"), Some("ops")));
        assert_eq!(task["choices"], json!(["approve", "reject", "terminate"]));
        assert_eq!(task["call"]["arguments"]["cmd"], "rm -r build");
        assert_eq!(task["correlation"], "approval/run/s1/1/c1");
        let id = task["id"].as_str().unwrap().to_owned();
        // The runner hears that its call waits for a person, and keeps waiting.
        while fleet.client.stats().progress_replies == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(fleet.client.stats().pending, 1);
        assert!(!asked.is_finished());
        assert_eq!(api.decide(&id, "modify", None).await.unwrap_err().status(), Some(422));
        let decided = api.decide(&id, "approve", Some("fine, it is a build dir")).await.unwrap();
        assert!(
            matches!(&decided.state, TaskState::Decided { decision: airlock_policy::Decision::Approve, explanation, decided_by, .. }
                if explanation == "fine, it is a build dir" && decided_by == "alice"),
            "{:?}",
            decided.state
        );
        let decision = asked.await.unwrap().unwrap();
        assert_eq!((decision_name(&decision), decision.approver.as_str()), ("approve", "human"));
        assert_eq!(decision.decided_by, "alice");
        assert_eq!(decision.explanation.as_deref(), Some("fine, it is a build dir"));
        let refused = api.decide(&id, "reject", None).await.unwrap_err();
        let RequestError::Refused { status: 409, error } = refused else { panic!("not a conflict: {refused}") };
        assert_eq!(error.error, "already decided");
        assert!(matches!(error.settled, Some(Settled::Decided { decided_by, .. }) if decided_by == "alice"));

        // The same HumanTask delivered again (a redelivery, a duplicate publish) is not a second task.
        let topology = Topology::new(prefix.as_str());
        let duplicate = duplicate_of(&service, &id).await;
        transport.publish(&Destination::queue(topology.human_queue("ops")), Message::new(duplicate)).await.unwrap();
        drained(&topology.human_queue("ops")).await;
        assert!(api.tasks().await.unwrap().is_empty());
        let history = api.get("/api/history").await.unwrap().json();
        assert_eq!(history["tasks"].as_array().unwrap().len(), 1);

        // A review, continued by the person.
        let client = fleet.client.clone();
        let asked = tokio::spawn(async move { client.review(review("s1", "c2", bash("ls"), "a b c", POLICY)).await });
        let task = pending(&api, 1).await.remove(0);
        assert_eq!(task["choices"], json!(["continue", "terminate"]));
        assert!(task["shown"]["call"]["text"].as_str().unwrap().contains("a b c"));
        api.decide(task["id"].as_str().unwrap(), "continue", None).await.unwrap();
        let decision = asked.await.unwrap().unwrap();
        assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("continue", "alice"));
        assert_eq!(
            decision.explanation.as_deref(),
            Some("Human operator reviewed the tool result and let the sample continue.")
        );

        // Nobody answers in time: the step's on_timeout decides, recorded as the timeout's.
        let decision = fleet
            .client
            .approve(approval("s2", "c1", json!({"function": "deploy", "arguments": {}}), POLICY))
            .await
            .unwrap();
        assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("reject", "timeout"));

        // The runner withdraws its request (its sample ended): the task leaves the list unanswered.
        let client = fleet.client.clone();
        let request = approval("s3", "c1", bash("make clean"), POLICY);
        let key = request.key.clone().unwrap();
        let asked = tokio::spawn(async move { client.approve(request).await });
        pending(&api, 1).await;
        fleet.client.cancel(&key, v1::Kind::Approval, "the sample ended").await;
        loop {
            let history = api.get("/api/history").await.unwrap().json();
            let withdrawn = history["tasks"].as_array().unwrap().iter().find(|t| t["state"] == "cancelled").cloned();
            if let Some(task) = withdrawn {
                assert_eq!(task["reason"], "the sample ended");
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        asked.abort();
        assert!(api.tasks().await.unwrap().is_empty());

        service.stop().await;
        fleet.stop().await;
        std::fs::remove_dir_all(dir).unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_stored_task_tells_its_runner_once_that_the_call_waits() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let (dir, store) = temp_store();
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        let service = Service::start(transport.clone(), reviewer_config(&prefix, &store, INSTANCE)).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        let mut replies = transport.consume(&topology.reply_queue("runner"), 0).await.unwrap();

        // A human task as a worker forwards it (the reviewer service takes it as it comes).
        let mut request = approval("s1", "c1", bash("rm -r build"), POLICY);
        request.reply_to = topology.reply_queue("runner");
        let step = v1::StepTask { request: Some(request), step: 1, name: "human".into(), ..Default::default() };
        let human = v1::HumanTask { task: Some(step), choices: Vec::new(), pool: "ops".into(), ..Default::default() };
        let task = prost::Message::encode_to_vec(&human);
        transport.publish(&topology.human_route("ops"), Message::new(task.clone())).await.unwrap();
        let id = pending(&api, 1).await.remove(0)["id"].as_str().unwrap().to_owned();

        let delivery = tokio::time::timeout(airlock_tests::HANG_GUARD, replies.next()).await.unwrap().unwrap();
        let (message, acker) = delivery.into_parts();
        acker.ack().await.unwrap();
        assert_eq!(message.correlation_id.as_deref(), Some("approval/run/s1/1/c1"));
        let reply = <v1::Reply as prost::Message>::decode(message.body.as_ref()).unwrap();
        assert!(reply.proof.is_empty() && reply.key_id.is_empty(), "the reviewer service proves nothing");
        let body = <v1::ReplyBody as prost::Message>::decode(reply.body.as_slice()).unwrap();
        let Some(v1::reply_body::Body::Progress(progress)) = body.body else { panic!("not a progress: {body:?}") };
        assert_eq!(progress, v1::Progress { pool: "ops".into(), task_id: id, step: 1, ..Default::default() });

        // The same task again (a redelivery, a duplicate publish) tells the runner nothing more.
        transport.publish(&topology.human_route("ops"), Message::new(task)).await.unwrap();
        drained(&topology.human_queue("ops")).await;
        assert_eq!(transport.message_count(&topology.reply_queue("runner")).await.unwrap(), 0);

        service.stop().await;
        std::fs::remove_dir_all(dir).unwrap();
    })
    .await;
}

/// The wire body of a stored task, to publish it again.
async fn duplicate_of(service: &Service, id: &str) -> Vec<u8> {
    let task = service.desk().store().task(id).await.unwrap().unwrap();
    prost::Message::encode_to_vec(&task.human)
}

#[tokio::test]
async fn a_restart_loses_nothing_and_sends_nothing_twice() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let (dir, store_url) = temp_store();
        let fleet = start_fleet(&transport, &prefix).await;
        let first = Service::start(transport.clone(), reviewer_config(&prefix, &store_url, INSTANCE)).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", first.local_addr()), REVIEWER_TOKEN);
        let mut asked = tokio::task::JoinSet::new();
        for i in 0..3 {
            let client = fleet.client.clone();
            asked.spawn(async move { client.approve(approval("s", &format!("c{i}"), bash("rm -r x"), POLICY)).await });
        }
        let tasks = pending(&api, 3).await;
        let id_of = |call: &str| {
            let task = tasks.iter().find(|t| t["key"]["tool_call_id"] == call).expect("the call's task");
            task["id"].as_str().unwrap().to_owned()
        };
        let (c0, mut rest) = (id_of("c0"), vec![id_of("c1"), id_of("c2")]);
        rest.sort();
        first.stop().await;

        // While no service runs, one task is decided but its answer not sent (as if the
        // process died between the two).
        let store = Store::open(&store_url).await.unwrap();
        let task = store.task(&c0).await.unwrap().unwrap();
        let verdict = Verdict {
            decision: airlock_policy::Decision::Reject,
            explanation: "decided before the crash".into(),
            decided_by: "alice".into(),
            decided_at: airlock_records::time::now_ms(),
        };
        let mut answer = task.step_result(&verdict);
        airlock_records::signed::sign_human_answer(&TestKeys::get().reviewer_key(), &mut answer);
        let answer = prost::Message::encode_to_vec(&answer);
        let recording =
            Recording { verdict, delivery: Delivery::Outbox { answer, lease_until: 0 }, webhooks: Vec::new() };
        assert!(matches!(store.decide(&task, &recording).await.unwrap(), Decided::Recorded(Some(_))));
        assert_eq!(store.unsent().await.unwrap(), 1);
        store.close().await;

        // The next start sends it, and still lists the other two, the same tasks.
        let second = Service::start(transport.clone(), reviewer_config(&prefix, &store_url, INSTANCE)).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", second.local_addr()), REVIEWER_TOKEN);
        let mut after: Vec<String> =
            pending(&api, 2).await.iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect();
        after.sort();
        assert_eq!(after, rest);
        for id in &after {
            api.decide(id, "approve", None).await.unwrap();
        }
        let mut decisions = Vec::new();
        while let Some(decision) = asked.join_next().await {
            let decision = decision.unwrap().unwrap();
            let name = decision_name(&decision);
            decisions.push((decision.key.unwrap().tool_call_id, name, decision.decided_by));
        }
        decisions.sort();
        assert_eq!(
            decisions,
            [
                ("c0".to_owned(), "reject", "alice".to_owned()),
                ("c1".to_owned(), "approve", "alice".to_owned()),
                ("c2".to_owned(), "approve", "alice".to_owned()),
            ]
        );
        // Marked sent once the broker confirmed: possibly just after the runner had its decision.
        while second.desk().store().unsent().await.unwrap() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        second.stop().await;

        // Nothing was sent twice: a third start has nothing to send, and the runner saw no
        // duplicate decision once every queue is drained.
        let third = Service::start(transport.clone(), reviewer_config(&prefix, &store_url, INSTANCE)).await.unwrap();
        assert_eq!(third.desk().store().unsent().await.unwrap(), 0);
        third.stop().await;
        let topology = Topology::new(prefix.as_str());
        drained(&topology.results_queue()).await;
        drained(&topology.requests_queue()).await;
        drained(&topology.reply_queue("runner")).await;
        assert_eq!(fleet.client.stats().ignored_replies, 0);
        fleet.stop().await;
        std::fs::remove_dir_all(dir).unwrap();
    })
    .await;
}

/// What a browser holds after signing in: its session cookie and the page's CSRF token.
struct Browser {
    cookie: String,
    csrf: String,
}

/// Signs in at `base` with the reviewer's token, as the login form posts it.
async fn sign_in(base: &str) -> Browser {
    let headers = [("Origin", base), ("Content-Type", "application/x-www-form-urlencoded")];
    let body = format!("token={REVIEWER_TOKEN}");
    let response = request("POST", &format!("{base}/login"), &headers, Some(body.as_bytes())).await.unwrap();
    assert_eq!(response.status, 303);
    let cookie = response.header("set-cookie").unwrap().split(';').next().unwrap().to_owned();
    let page = request("GET", &format!("{base}/"), &[("Cookie", &cookie)], None).await.unwrap();
    let page = String::from_utf8(page.body).unwrap();
    let csrf = page.split("name=\"csrf-token\" content=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    Browser { cookie, csrf }
}

impl Browser {
    /// Posts `body` to `path` at `base` with the cookie, this origin and the CSRF token.
    async fn post(&self, base: &str, path: &str, body: &str) -> airlock_reviewer::client::Response {
        let headers = [
            ("Origin", base),
            ("Cookie", self.cookie.as_str()),
            ("X-CSRF-Token", self.csrf.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
        ];
        request("POST", &format!("{base}{path}"), &headers, Some(body.as_bytes())).await.unwrap()
    }

    /// The status of the pending-ids route for this session at `base` (200 or 401).
    async fn status(&self, base: &str) -> u16 {
        request("GET", &format!("{base}/ui/pending"), &[("Cookie", &self.cookie)], None).await.unwrap().status
    }
}

/// Opens the event stream of session `cookie` at `addr` and reads up to its headers, so the
/// stream is known to be open.
async fn open_events(addr: std::net::SocketAddr, cookie: &str) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "the stream closed before its headers");
        seen.push(byte[0]);
    }
    assert!(seen.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
    stream
}

/// The value of series `series` (name and labels) in a Prometheus scrape of `addr`.
async fn scraped(addr: std::net::SocketAddr, series: &str) -> Option<f64> {
    let text = request("GET", &format!("http://{addr}/metrics"), &[], None).await.unwrap().body;
    let text = String::from_utf8(text).unwrap();
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Waits until the scrape of `addr` shows `value` for `series`.
async fn scrape_until(addr: std::net::SocketAddr, series: &str, value: f64) {
    while scraped(addr, series).await != Some(value) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn sessions_hold_across_restarts_and_services_sharing_a_store() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        with_pg("sessions", move |store| async move {
            let fleet = start_fleet(&transport, &prefix).await;
            let metrics = std::sync::Arc::new(airlock_telemetry::metrics::Metrics::new());
            let scrape =
                airlock_telemetry::metrics::serve("127.0.0.1:0".parse().unwrap(), metrics.clone()).await.unwrap();
            let config = || ReviewerConfig { metrics: metrics.clone(), ..reviewer_config(&prefix, &store, INSTANCE) };

            // Signed in on A; A stops.
            let a = Service::start(transport.clone(), config()).await.unwrap();
            let browser = sign_in(&format!("http://{}", a.local_addr())).await;
            a.stop().await;

            // B, a new service on the same store, takes the cookie and the CSRF token for a decision.
            let b = Service::start(transport.clone(), config()).await.unwrap();
            let b_url = format!("http://{}", b.local_addr());
            let api = ApiClient::new(&b_url, REVIEWER_TOKEN);
            let client = fleet.client.clone();
            let asked =
                tokio::spawn(async move { client.approve(approval("s1", "c1", bash("rm -r build"), POLICY)).await });
            let id = pending(&api, 1).await.remove(0)["id"].as_str().unwrap().to_owned();
            scrape_until(scrape, "airlock_reviewer_pending{pool=\"ops\"}", 1.0).await;
            let decided = browser.post(&b_url, &format!("/ui/tasks/{id}/decision"), "decision=approve").await;
            assert_eq!(decided.status, 200, "{}", String::from_utf8_lossy(&decided.body));
            let decision = asked.await.unwrap().unwrap();
            assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
            scrape_until(scrape, "airlock_reviewer_pending{pool=\"ops\"}", 0.0).await;
            let count = "airlock_reviewer_decision_seconds_count{pool=\"ops\",decider=\"person\"}";
            assert_eq!(scraped(scrape, count).await, Some(1.0));

            // C, another replica on the store, serves the same session and its event stream…
            let c = Service::start(transport.clone(), config()).await.unwrap();
            let c_url = format!("http://{}", c.local_addr());
            assert_eq!(browser.status(&c_url).await, 200);
            let mut events = open_events(c.local_addr(), &browser.cookie).await;

            // …until a logout on B: C's stream ends (C rechecks its sessions) and C refuses the cookie.
            assert_eq!(browser.post(&b_url, "/logout", "").await.status, 303);
            let mut rest = Vec::new();
            tokio::time::timeout(HANG_GUARD, events.read_to_end(&mut rest)).await.expect("the stream ended").unwrap();
            assert_eq!(browser.status(&c_url).await, 401);
            assert_eq!(browser.status(&b_url).await, 401);

            // An expired session is refused.
            let handle = Store::open(&store).await.unwrap();
            let expired = "0123456789abcdef".repeat(4);
            let now = airlock_records::time::now_ms();
            let session = StoredSession {
                id_sha256: sha256_hex(&expired),
                reviewer: "alice".into(),
                token_sha256: sha256_hex(REVIEWER_TOKEN),
                csrf: "csrf".into(),
                created_at: now - 2_000,
                expires_at: now - 1_000,
            };
            handle.open_session(&session).await.unwrap();
            let stale = Browser { cookie: format!("{SESSION_COOKIE}={expired}"), csrf: "csrf".into() };
            assert_eq!(stale.status(&c_url).await, 401);
            handle.close().await;

            b.stop().await;
            c.stop().await;
            fleet.stop().await;
        })
        .await;
    })
    .await;
}
