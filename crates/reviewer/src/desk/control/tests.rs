//! The desk under the fleet's control, over a control log on the in-process transport:
//! incidents marked and what they end, switches checked and thrown, pending tasks ended by a
//! sweep, at intake and by the watcher.

use std::path::PathBuf;

use airlock_contract::v1::{self, ControlResponse, control_event::Event};
use airlock_control::ControlLog;
use airlock_integrity::{KeyFile, PublicKeys, SigningKey};
use airlock_records::signed::verify_human_answer;
use airlock_testkit::database::with_pg;
use airlock_transport::{MemoryTransport, Transport};
use prost::Message as _;

use super::*;
use crate::auth::{Reviewer, Reviewers};
use crate::desk::refusal::Grounds;
use crate::fixtures::{POLICY, calling, control_log, human, memory_store, until};
use crate::http::AppState;
use crate::site::Site;
use crate::store::{Inserted, OutboxEntry, Store};
use crate::task::{Incoming, State};
use airlock_control::APPROVER;

/// The service's id.
const SERVICE: &str = "reviewer-1";
/// A policy whose incidents end a run after two.
const STRICT: &str =
    "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\nincident:\n  after: 2\n  then: terminate\n";

type Outbox = tokio::sync::mpsc::UnboundedReceiver<OutboxEntry>;

/// A desk that follows a control log, and an operator of the same fleet.
struct Fleet {
    state: AppState,
    outbox: Outbox,
    /// Appends as people and follows the log as another process of the fleet.
    operator: ControlLog<MemoryTransport>,
    transport: MemoryTransport,
    key: Arc<SigningKey>,
}

async fn fleet(store: Store, policy_dir: Option<PathBuf>) -> Fleet {
    let transport = MemoryTransport::new();
    let key = Arc::new(SigningKey::generate().unwrap());
    let reviewers = Reviewers::from_list(vec![Reviewer {
        name: "alice".into(),
        token_sha256: String::new(),
        pools: vec!["ops".into()],
        admin: false,
        overrides: Vec::new(),
    }]);
    let (state, outbox) = AppState::observed(
        store,
        reviewers,
        vec!["ops".into()],
        Site::default(),
        Arc::default(),
        Some(key.clone()),
        Default::default(),
    );
    assert!(state.desk.follow(Control::new(control_log(&transport, SERVICE).await, SERVICE, policy_dir)));
    let operator = control_log(&transport, "operator").await;
    Fleet { state, outbox, operator, transport, key }
}

fn alice() -> Reviewer {
    Reviewer {
        name: "alice".into(),
        token_sha256: String::new(),
        pools: vec!["ops".into()],
        admin: false,
        overrides: Vec::new(),
    }
}

impl Fleet {
    fn desk(&self) -> &Arc<Desk> {
        &self.state.desk
    }

    /// Stores `incoming` pending; its id.
    async fn pending(&self, incoming: &Incoming) -> String {
        let Inserted::Created(id) = self.desk().store().insert(incoming, now_ms()).await.unwrap() else { panic!() };
        id
    }

    /// Throws `response` on `run` of `tenant` by hand, and waits until the desk's view holds it.
    async fn throw(&self, run: &str, tenant: &str, response: ControlResponse) {
        let switch = v1::RunSwitch {
            run: Some(v1::RunRef { run_id: run.into(), tenant: tenant.into() }),
            response: response.into(),
            reason: "caught exfiltration".into(),
            ..Default::default()
        };
        self.operator.append_as("ops-lead", Event::RunSwitch(switch)).await.unwrap();
        let control = self.desk().control().unwrap();
        until(control.view(), |state| {
            state.run(tenant, run).is_some_and(|r| r.switch.is_some() == (response != ControlResponse::None))
        })
        .await;
    }

    /// Waits until the desk's view counts `n` incidents in `run`.
    async fn incidents(&self, run: &str, n: usize) {
        until(self.desk().control().unwrap().view(), |state| {
            state.run("", run).is_some_and(|r| r.incidents.len() == n)
        })
        .await;
    }

    /// The answer handed to the outbox, checked to be signed by the service.
    fn answer(&mut self) -> v1::StepResult {
        let entry = self.outbox.try_recv().expect("an answer handed to the outbox");
        let result = v1::StepResult::decode(entry.body.as_slice()).unwrap();
        let keys = PublicKeys::parse(&self.key.public_key().to_line(), "reviewer.pub").unwrap();
        verify_human_answer(&keys, &result).expect("signed by the service");
        result
    }

    /// Every entry of the log appended so far, as the operator follows it.
    async fn entries(&self) -> Vec<v1::ControlEvent> {
        let mut follower = self.transport.follow("t.control").await.unwrap();
        let appended = self.operator.view().read().entries();
        let mut entries = Vec::new();
        while (entries.len() as u64) < appended {
            let message = follower.next().await.unwrap();
            entries.push(v1::ControlEvent::decode(message.body.as_ref()).unwrap());
        }
        entries
    }
}

/// `incoming` asked under `policy`.
fn under(mut incoming: Incoming, policy: v1::policy::Source) -> Incoming {
    let request = incoming.human.task.as_mut().and_then(|t| t.request.as_mut()).unwrap();
    request.policy = Some(v1::Policy { source: Some(policy), digest: String::new() });
    incoming
}

/// `incoming` asked in the namespace of `tenant`.
fn of_tenant(incoming: Incoming, tenant: &str) -> Incoming {
    let mut human = incoming.human;
    let request = human.task.as_mut().and_then(|t| t.request.as_mut()).unwrap();
    request.key.as_mut().unwrap().tenant = tenant.into();
    Incoming::decode(&human.encode_to_vec(), &incoming.pool).unwrap()
}

fn verdict(task: &Task) -> &Verdict {
    let State::Decided(verdict) = &task.state else { panic!("not decided: {:?}", task.state) };
    verdict
}

async fn ended_by_a_switch(store: Store) {
    let mut fleet = fleet(store, None).await;
    let approval = fleet.pending(&human("ops", "s1", "c1", false, 0)).await;
    let review = fleet.pending(&human("ops", "s2", "c2", true, 0)).await;
    let other_run = fleet.pending(&calling("ops", "other", "s1", "c3", "bash", "{}", 0)).await;
    let other_tenant = fleet.pending(&of_tenant(human("ops", "s3", "c4", false, 0), "acme")).await;
    let decided = fleet.pending(&human("ops", "s4", "c5", false, 0)).await;
    let task = fleet.desk().store().task(&decided).await.unwrap().unwrap();
    fleet.desk().record(&task, Decision::Approve, String::new(), "alice").await.unwrap();
    fleet.answer();

    fleet.throw("run", "", ControlResponse::Terminate).await;
    assert_eq!(fleet.desk().sweep("", "run").await.unwrap(), 2);
    let why = "The fleet's control ended this call: run run was switched by ops-lead: caught exfiltration.";
    for id in [&approval, &review] {
        let task = fleet.desk().store().task(id).await.unwrap().unwrap();
        let verdict = verdict(&task);
        assert_eq!(
            (verdict.decision, verdict.decided_by.as_str(), verdict.explanation.as_str()),
            (Decision::Terminate, SERVICE, why)
        );
        let answer = fleet.answer().answer.unwrap();
        assert_eq!((answer.approver.as_str(), answer.decided_by.as_str()), (APPROVER, SERVICE));
        assert_eq!(answer.decision, i32::from(v1::DecisionKind::Terminate));
        assert_eq!(answer.explanation.as_deref(), Some(why));
    }
    assert!(fleet.outbox.try_recv().is_err(), "nothing else answered");
    for id in [&other_run, &other_tenant] {
        assert!(fleet.desk().store().task(id).await.unwrap().unwrap().is_pending(), "another run's task stays");
    }
    let task = fleet.desk().store().task(&decided).await.unwrap().unwrap();
    assert_eq!(verdict(&task).decided_by, "alice", "a task decided before stays as it was");
    assert_eq!(fleet.desk().sweep("", "run").await.unwrap(), 0, "nothing is ended twice");
    fleet.desk().store().close().await;
}

#[tokio::test]
async fn a_terminate_switch_ends_the_pending_tasks_of_its_run_and_no_other() {
    ended_by_a_switch(memory_store().await).await;
}

#[tokio::test]
async fn a_terminate_switch_ends_the_pending_tasks_of_its_run_on_postgres() {
    with_pg("control_switch", |url| async move { ended_by_a_switch(Store::open(&url).await.unwrap()).await }).await;
}

#[tokio::test]
async fn incidents_end_the_tasks_of_a_run_past_the_rule_of_each_tasks_own_policy() {
    let dir = std::env::temp_dir().join(format!("airlock-control-{}", crate::auth::random_hex::<6>()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("strict.yaml"), STRICT).unwrap();
    let mut fleet = fleet(memory_store().await, Some(dir.clone())).await;
    let inline = |call| under(human("ops", "s1", call, false, 0), v1::policy::Source::Inline(STRICT.into()));
    let named = |call, name: &str| under(human("ops", "s2", call, false, 0), v1::policy::Source::Name(name.into()));
    let strict_inline = fleet.pending(&inline("c1")).await;
    let strict_named = fleet.pending(&named("c2", "strict")).await;
    let default_rule =
        fleet.pending(&under(human("ops", "s3", "c3", false, 0), v1::policy::Source::Inline(POLICY.into()))).await;
    let unknown = fleet.pending(&named("c4", "absent")).await;

    let marked = fleet.desk().mark_incident(&alice(), &default_rule, Some(" deletes the build ".into())).await.unwrap();
    assert_eq!(
        (marked.run_id.as_str(), marked.by.as_str(), marked.note.as_str()),
        ("run", "alice", "deletes the build")
    );
    // Marking twice is harmless: one task is one incident.
    fleet.desk().mark_incident(&alice(), &default_rule, None).await.unwrap();
    fleet.incidents("run", 1).await;
    assert_eq!(fleet.desk().sweep("", "run").await.unwrap(), 0, "one incident of the two the rule needs");

    fleet.desk().mark_incident(&alice(), &unknown, None).await.unwrap();
    fleet.incidents("run", 2).await;
    assert_eq!(fleet.desk().sweep("", "run").await.unwrap(), 2);
    for id in [&strict_inline, &strict_named] {
        let task = fleet.desk().store().task(id).await.unwrap().unwrap();
        assert_eq!(verdict(&task).explanation, "The fleet's control ended this call: 2 incident(s) marked in run run.");
        fleet.answer();
    }
    // The default rule sends later calls to people: its task is with one already. A policy
    // the service cannot read ends nothing here (the workers apply it to later calls).
    for id in [&default_rule, &unknown] {
        assert!(fleet.desk().store().task(id).await.unwrap().unwrap().is_pending());
    }

    // Every mark reached the log with the reviewer's name, the task's call key and id.
    let incidents: Vec<(String, v1::Incident)> = fleet
        .entries()
        .await
        .into_iter()
        .filter_map(|entry| match entry.event {
            Some(Event::Incident(incident)) => Some((entry.by, incident)),
            _ => None,
        })
        .collect();
    assert_eq!(incidents.len(), 3);
    let (by, first) = &incidents[0];
    assert_eq!(
        (by.as_str(), first.marked.as_str(), first.note.as_str()),
        ("alice", default_rule.as_str(), "deletes the build")
    );
    let key = first.key.as_ref().unwrap();
    assert_eq!((key.run_id.as_str(), key.sample_id.as_str(), key.tool_call_id.as_str()), ("run", "s3", "c3"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn without_a_policy_directory_only_a_switch_ends_a_named_policys_tasks() {
    let fleet = fleet(memory_store().await, None).await;
    let strict =
        fleet.pending(&under(human("ops", "s1", "c1", false, 0), v1::policy::Source::Name("strict".into()))).await;
    let other = fleet.pending(&human("ops", "s2", "c2", false, 0)).await;
    fleet.desk().mark_incident(&alice(), &other, None).await.unwrap();
    fleet.desk().mark_incident(&alice(), &strict, None).await.unwrap();
    fleet.incidents("run", 2).await;
    assert_eq!(fleet.desk().sweep("", "run").await.unwrap(), 0);
    fleet.throw("run", "", ControlResponse::Terminate).await;
    assert_eq!(fleet.desk().sweep("", "run").await.unwrap(), 2);
}

#[tokio::test]
async fn a_task_arriving_for_a_terminated_run_is_answered_at_once_and_one_of_a_paused_run_waits() {
    let mut fleet = fleet(memory_store().await, None).await;
    fleet.throw("run", "", ControlResponse::Terminate).await;
    fleet.throw("paused", "", ControlResponse::Human).await;
    let incoming = human("ops", "s1", "c1", false, 0);
    let task = incoming.pending("t1", now_ms());
    fleet.desk().insert(&incoming, &task).await.unwrap();
    assert!(!fleet.desk().admit(&task, None).await, "answered at intake");
    let stored = fleet.desk().store().task("t1").await.unwrap().unwrap();
    assert_eq!((verdict(&stored).decision, verdict(&stored).decided_by.as_str()), (Decision::Terminate, SERVICE));
    assert_eq!(fleet.answer().answer.unwrap().approver, APPROVER);

    let incoming = calling("ops", "paused", "s1", "c2", "bash", "{}", 0);
    let task = incoming.pending("t2", now_ms());
    fleet.desk().insert(&incoming, &task).await.unwrap();
    assert!(fleet.desk().admit(&task, None).await, "a person decides a paused run's calls");
    assert!(fleet.outbox.try_recv().is_err());
}

#[tokio::test]
async fn the_watcher_ends_pending_tasks_as_the_log_changes_and_a_pause_keeps_them() {
    let mut fleet = fleet(memory_store().await, None).await;
    let ended = fleet.pending(&human("ops", "s1", "c1", false, 0)).await;
    let kept = fleet.pending(&calling("ops", "paused", "s1", "c2", "bash", "{}", 0)).await;
    let stop = CancellationToken::new();
    let watching = tokio::spawn(watch(fleet.desk().clone(), stop.clone()));
    fleet.throw("paused", "", ControlResponse::Human).await;
    fleet.throw("run", "", ControlResponse::Terminate).await;
    tokio::time::timeout(Duration::from_secs(5), async {
        while fleet.desk().store().task(&ended).await.unwrap().unwrap().is_pending() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the watcher ended the task");
    assert_eq!(fleet.answer().answer.unwrap().decided_by, SERVICE);
    assert!(fleet.desk().store().task(&kept).await.unwrap().unwrap().is_pending());
    stop.cancel();
    watching.await.unwrap();
}

#[tokio::test]
async fn a_decision_marked_as_an_incident_is_recorded_then_marked_and_a_refused_one_marks_nothing() {
    let mut fleet = fleet(memory_store().await, None).await;
    let refused = fleet.pending(&human("ops", "s1", "c1", false, 0)).await;
    let caught = fleet.pending(&human("ops", "s2", "c2", false, 0)).await;
    let maybe = Answer { decision: "maybe".into(), explanation: None, arguments: None };
    let refusal = fleet.desk().decide_incident(&alice(), &refused, maybe, None).await.unwrap_err();
    assert!(matches!(refusal, Refusal::UnknownDecision { .. }), "{refusal}");

    // An incident counts in a run: a call that names none is marked nowhere, nor decided.
    let runless = fleet.pending(&calling("ops", "", "s3", "c3", "bash", "{}", 0)).await;
    let refusal = fleet.desk().mark_incident(&alice(), &runless, None).await.unwrap_err();
    assert!(matches!(refusal, Refusal::Control(Uncontrolled::NoRun)), "{refusal}");
    let approve = Answer { decision: "approve".into(), explanation: None, arguments: None };
    assert!(fleet.desk().decide_incident(&alice(), &runless, approve, None).await.is_err());
    assert!(fleet.desk().store().task(&runless).await.unwrap().unwrap().is_pending());

    let reject = Answer { decision: "reject".into(), explanation: Some("reads ~/.ssh".into()), arguments: None };
    let task = fleet.desk().decide_incident(&alice(), &caught, reject, None).await.unwrap();
    assert_eq!(verdict(&task).decision, Decision::Reject);
    assert_eq!(fleet.answer().answer.unwrap().decided_by, "alice");
    fleet.incidents("run", 1).await;
    let incidents: Vec<String> =
        fleet.desk().control().unwrap().view().read().run("", "run").unwrap().incidents.iter().cloned().collect();
    assert_eq!(incidents, std::slice::from_ref(&caught), "the refused task is unmarked");
    let notes: Vec<String> = fleet
        .entries()
        .await
        .into_iter()
        .filter_map(|entry| match entry.event {
            Some(Event::Incident(incident)) => Some(incident.note),
            _ => None,
        })
        .collect();
    assert_eq!(notes, ["reads ~/.ssh"], "the explanation is the note when none is given");
}

#[tokio::test]
async fn switches_are_checked_before_they_reach_the_log() {
    let fleet = fleet(memory_store().await, None).await;
    let admin = Reviewer { admin: true, ..alice() };
    let body = |tenant: &str, reason: &str, pool: &str| RunSwitchBody {
        tenant: Some(tenant.into()),
        reason: Some(reason.into()),
        pool: Some(pool.into()),
    };
    for (run, action, body, refused) in [
        ("", RunAction::Terminate, RunSwitchBody::default(), "the run id is empty"),
        ("r1", RunAction::Terminate, body("a\0b", "", ""), "the tenant holds a NUL character"),
        (
            "r1",
            RunAction::Terminate,
            body("", &"x".repeat(MAX_EXPLANATION + 1), ""),
            "the reason is longer than 4000 characters",
        ),
        ("r1", RunAction::Terminate, body("", "", "security"), "'pool' goes with a pause only"),
        ("r1", RunAction::Pause, body("", "", "no.dots"), "pool"),
    ] {
        let refusal = fleet.desk().switch_run(&admin, run, action, body).await.unwrap_err();
        assert!(refusal.to_string().contains(refused), "{run} {action:?}: {refusal}");
        assert_eq!(refusal.grounds(), Grounds::Invalid);
    }
    let switched =
        fleet.desk().switch_run(&admin, "r1", RunAction::Pause, body("acme", "look closer", "security")).await.unwrap();
    assert_eq!(
        switched,
        RunSwitched { run: "r1".into(), tenant: "acme".into(), response: "human".into(), by: "alice".into() }
    );
    until(fleet.desk().control().unwrap().view(), |state| state.run("acme", "r1").is_some()).await;
    let runs = fleet.desk().runs().unwrap().runs;
    assert_eq!(runs.len(), 1, "only the switch that was thrown: {runs:?}");
    let switch = runs[0].switch.as_ref().unwrap();
    assert_eq!(
        (switch.response.as_str(), switch.pool.as_deref(), switch.by.as_str()),
        ("human", Some("security"), "alice")
    );
    assert_eq!(switch.reason, "look closer");
}

#[tokio::test]
async fn without_a_control_log_marks_and_switches_are_unavailable() {
    let (state, _outbox) = AppState::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    let Inserted::Created(id) = state.desk.store().insert(&human("ops", "s1", "c1", false, 0), 1).await.unwrap() else {
        panic!()
    };
    let refusal = state.desk.mark_incident(&alice(), &id, None).await.unwrap_err();
    assert!(matches!(refusal, Refusal::Control(Uncontrolled::Unfollowed)), "{refusal}");
    assert_eq!(refusal.grounds(), Grounds::Unavailable);
    assert!(state.desk.runs().is_err());
    assert!(state.desk.store().task(&id).await.unwrap().unwrap().is_pending());
}
