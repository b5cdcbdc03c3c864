//! The fleet's control at the desk: incidents people mark, switches admins throw on runs,
//! and the pending tasks of a run the control log now ends.
//!
//! The service follows the control log ([`airlock_control`]) as every worker does, and keeps
//! its view. A person who finds an attack marks a task (pending or decided) as an incident:
//! an `Incident` naming the task's call key and id, appended with the person's name, which
//! every worker counts against the run's `incident:` rule. An admin throws a `RunSwitch`
//! (pause, resume, terminate) by hand the same way.
//!
//! When the view says a pending task's call is now ended (`Terminate`: a switch by hand, or
//! enough incidents under the rule of the task's own policy), the desk answers the task
//! `terminate` as [`airlock_control::APPROVER`] through the same signed outbox as a person's answer, decided
//! by this service's id, with the why as its explanation: the worker that takes it ends the
//! sample, and the task leaves the pending list. That is checked for the pending tasks of a
//! run each time the log changes what ends it ([`watch`]), and for each task as it arrives
//! ([`Desk::admit`]). A task of a paused run (a person decides) or of a run switched to
//! another policy (the worker starts the chain again when the answer comes) stays.
//!
//! The task's own policy is compiled from its request: an inline text, or a named one from the
//! service's policy directory. Without the directory a named policy's rule is unknown here,
//! and only switches thrown by hand end its tasks (the workers still apply the rule to every
//! later call).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1::{self, ControlResponse, control_event::Event};
use airlock_control::{ControlLog, ControlState, ControlView, Switch};
use airlock_policy::chain::Policy;
use airlock_policy::control::{Control as Rules, Response};
use airlock_policy::{Decision, limits};
use airlock_records::review::control::{IncidentMarked, RunList, RunSwitchBody, RunSwitched, RunView, SwitchView};
use airlock_records::time::now_ms;
use airlock_transport::{Transport, TransportError};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Answer, By, Desk, MAX_EXPLANATION, Recorded, Refusal};
use crate::auth::Reviewer;
use crate::logged::Logged;
use crate::store::StoreError;
use crate::task::{Task, Verdict};
use crate::triage::Filter;

/// How long the watcher waits after a look at the runs before the next, so a burst of the log
/// (the breakers' counts, the monitors' scores) costs one look at the runs, not one an entry.
pub const COALESCE: Duration = Duration::from_millis(50);

/// How long the watcher waits to sweep a run again after the store failed.
pub const RETRY: Duration = Duration::from_secs(2);

/// Appends entries to the fleet's control log as someone: a [`ControlLog`] over any transport,
/// behind one type.
pub trait Append: Send + Sync {
    /// Appends `event` as `by`; returns once the broker holds it.
    fn append_as<'a>(&'a self, by: &'a str, event: Event) -> BoxFuture<'a, Result<(), TransportError>>;
}

impl<T: Transport> Append for ControlLog<T> {
    fn append_as<'a>(&'a self, by: &'a str, event: Event) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(ControlLog::append_as(self, by, event))
    }
}

/// The control log as the desk follows it.
pub struct Control {
    view: ControlView,
    log: Box<dyn Append>,
    /// This service's id: `decided_by` of the tasks control ends.
    id: String,
    /// Where named policies are read, if anywhere.
    policy_dir: Option<PathBuf>,
}

impl fmt::Debug for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control").field("id", &self.id).field("policy_dir", &self.policy_dir).finish_non_exhaustive()
    }
}

impl Control {
    /// The control `log` followed by service `id`, reading named policies in `policy_dir`.
    pub fn new<T: Transport>(log: ControlLog<T>, id: impl Into<String>, policy_dir: Option<PathBuf>) -> Self {
        Control { view: log.view().clone(), log: Box::new(log), id: id.into(), policy_dir }
    }

    /// The state, kept current.
    pub fn view(&self) -> &ControlView {
        &self.view
    }
}

/// Why an incident or a switch was refused.
#[derive(Debug, thiserror::Error)]
pub enum Uncontrolled {
    /// A note or reason longer than [`MAX_EXPLANATION`] characters.
    #[error("the {0} is longer than {MAX_EXPLANATION} characters")]
    TooLong(&'static str),
    /// A text holding a NUL character.
    #[error("the {0} holds a NUL character")]
    Nul(&'static str),
    /// A task whose call names no run: an incident counts in a run.
    #[error("this task's call names no run")]
    NoRun,
    /// An empty run id.
    #[error("the run id is empty")]
    EmptyRun,
    /// A pool given to another switch than a pause.
    #[error("'pool' goes with a pause only")]
    PoolWithoutPause,
    /// A pool that is not a pool's name.
    #[error("{0}")]
    Pool(String),
    /// The service follows no control log.
    #[error("this service follows no control log")]
    Unfollowed,
    /// The log did not take the entry.
    #[error("the control log did not take the entry: {0}")]
    NotAppended(TransportError),
    /// The decision was recorded, but the incident mark did not reach the log.
    #[error("the decision was recorded, but the incident was not marked ({0}); mark it again")]
    DecidedNotMarked(TransportError),
}

impl Uncontrolled {
    /// Whether trying again may work (the log, not the request, failed).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Uncontrolled::Unfollowed | Uncontrolled::NotAppended(_) | Uncontrolled::DecidedNotMarked(_))
    }
}

/// A switch an admin throws on a run by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAction {
    /// Every later call goes to a person.
    Pause,
    /// The run's calls are decided by their policies again; its count of incidents starts over.
    Resume,
    /// Every later call ends its sample; its pending tasks are answered `terminate`.
    Terminate,
}

impl RunAction {
    /// Every action, as the UI offers them.
    pub const ALL: [RunAction; 3] = [RunAction::Pause, RunAction::Resume, RunAction::Terminate];

    /// Its name in a path or a form.
    pub fn as_str(self) -> &'static str {
        match self {
            RunAction::Pause => "pause",
            RunAction::Resume => "resume",
            RunAction::Terminate => "terminate",
        }
    }

    fn response(self) -> ControlResponse {
        match self {
            RunAction::Pause => ControlResponse::Human,
            RunAction::Resume => ControlResponse::None,
            RunAction::Terminate => ControlResponse::Terminate,
        }
    }
}

impl FromStr for RunAction {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunAction::ALL.into_iter().find(|action| action.as_str() == s).ok_or(())
    }
}

impl Desk {
    /// Follows `control` from now on: marks and switches go to its log, and the tasks it ends
    /// are answered. Once only: whether this was the first.
    pub fn follow(&self, control: Control) -> bool {
        self.control.set(control).is_ok()
    }

    /// The control log followed, if any.
    pub fn control(&self) -> Option<&Control> {
        self.control.get()
    }

    fn followed(&self) -> Result<&Control, Uncontrolled> {
        self.control().ok_or(Uncontrolled::Unfollowed)
    }

    /// Marks task `id`, pending or decided, as an incident as `reviewer`, who may see it, with
    /// `note`: appended to the control log, where every worker counts it against the run's
    /// `incident:` rule. A task marked twice counts once.
    pub async fn mark_incident(
        &self,
        reviewer: &Reviewer,
        id: &str,
        note: Option<String>,
    ) -> Result<IncidentMarked, Refusal> {
        let note = checked("note", note)?;
        let control = self.followed()?;
        let task = self.markable(reviewer, id).await?;
        Ok(self.append_incident(control, reviewer, &task, note).await.map_err(Uncontrolled::NotAppended)?)
    }

    /// Decides task `id` with `reviewer`'s `answer` as [`Desk::decide`] does, then marks it as
    /// an incident with `note` (the answer's explanation when none is given). Nothing is
    /// marked when the decision is refused.
    pub async fn decide_incident(
        &self,
        reviewer: &Reviewer,
        id: &str,
        answer: Answer,
        note: Option<String>,
    ) -> Result<Task, Refusal> {
        let note = checked("note", note.or_else(|| answer.explanation.clone()))?;
        let control = self.followed()?;
        self.markable(reviewer, id).await?;
        let task = self.decide(reviewer, id, answer).await?;
        self.append_incident(control, reviewer, &task, note).await.map_err(Uncontrolled::DecidedNotMarked)?;
        Ok(task)
    }

    /// Task `id`, if `reviewer` may see it and its call names a run (an incident counts in one).
    async fn markable(&self, reviewer: &Reviewer, id: &str) -> Result<Task, Refusal> {
        let task = self.visible(reviewer, id).await?;
        if task.request().and_then(|r| r.key.as_ref()).is_none_or(|key| key.run_id.is_empty()) {
            return Err(Uncontrolled::NoRun.into());
        }
        Ok(task)
    }

    async fn append_incident(
        &self,
        control: &Control,
        reviewer: &Reviewer,
        task: &Task,
        note: String,
    ) -> Result<IncidentMarked, TransportError> {
        let key = task.request().and_then(|r| r.key.clone()).unwrap_or_default();
        let marked = IncidentMarked {
            task: task.id.clone(),
            run_id: key.run_id.clone(),
            tenant: key.tenant.clone(),
            by: reviewer.name.clone(),
            note: note.clone(),
        };
        let incident = v1::Incident { key: Some(key), marked: task.id.clone(), note };
        control.log.append_as(&reviewer.name, Event::Incident(incident)).await?;
        info!(task = %task.id, run = %Logged(&marked.run_id), by = %Logged(&reviewer.name), "Task marked as an incident.");
        Ok(marked)
    }

    /// Throws `action` on run `run_id` as `admin` (whose right to is the caller's to check),
    /// as `body` says: appended to the control log, where every worker applies it to the
    /// run's later calls and this desk to the run's pending tasks.
    pub async fn switch_run(
        &self,
        admin: &Reviewer,
        run_id: &str,
        action: RunAction,
        body: RunSwitchBody,
    ) -> Result<RunSwitched, Refusal> {
        if run_id.is_empty() {
            return Err(Uncontrolled::EmptyRun.into());
        }
        let tenant = body.tenant.unwrap_or_default();
        for (what, text) in [("run id", run_id), ("tenant", tenant.as_str())] {
            if text.contains('\0') {
                return Err(Uncontrolled::Nul(what).into());
            }
        }
        let reason = checked("reason", body.reason)?;
        let pool = match (body.pool.filter(|p| !p.is_empty()), action) {
            (Some(pool), RunAction::Pause) => {
                limits::check_pool_name(&pool).map_err(Uncontrolled::Pool)?;
                pool
            }
            (Some(_), _) => return Err(Uncontrolled::PoolWithoutPause.into()),
            (None, _) => String::new(),
        };
        let control = self.followed()?;
        let response = action.response();
        let switch = v1::RunSwitch {
            run: Some(v1::RunRef { run_id: run_id.to_owned(), tenant: tenant.clone() }),
            response: response.into(),
            pool,
            policy: String::new(),
            reason,
        };
        control.log.append_as(&admin.name, Event::RunSwitch(switch)).await.map_err(Uncontrolled::NotAppended)?;
        info!(run = %Logged(run_id), tenant = %Logged(&tenant), action = action.as_str(), by = %Logged(&admin.name), "Run switched.");
        Ok(RunSwitched { run: run_id.to_owned(), tenant, response: response_name(response), by: admin.name.clone() })
    }

    /// The runs under control (a switch thrown by hand, or incidents marked), as the view
    /// holds them, by tenant then run.
    pub fn runs(&self) -> Result<RunList, Refusal> {
        let control = self.followed()?;
        let state = control.view.read();
        let mut runs: Vec<RunView> = state
            .runs()
            .filter(|run| run.switch.is_some() || !run.incidents.is_empty())
            .map(|run| {
                let mut incidents: Vec<String> = run.incidents.iter().cloned().collect();
                incidents.sort();
                RunView {
                    tenant: run.tenant.to_owned(),
                    run_id: run.run_id.to_owned(),
                    switch: run.switch.map(|switched| {
                        let (response, pool, policy) = match &switched.response {
                            Switch::Human(pool) => ("human", pool.clone(), None),
                            Switch::Policy(name) => ("policy", None, Some(name.clone())),
                            Switch::Terminate => ("terminate", None, None),
                        };
                        SwitchView {
                            response: response.to_owned(),
                            pool,
                            policy,
                            by: switched.by.clone(),
                            reason: switched.reason.clone(),
                        }
                    }),
                    incidents,
                }
            })
            .collect();
        runs.sort_by(|a, b| (&a.tenant, &a.run_id).cmp(&(&b.tenant, &b.run_id)));
        Ok(RunList { runs })
    }

    /// Answers `task` `terminate` if the control log now ends its call; whether it did. A
    /// failure is logged: the task waits for a person, and the worker ends the sample when
    /// the answer comes all the same.
    pub(super) async fn ended_by_control(&self, task: &Task) -> bool {
        match self.end_if_controlled(task, &mut Compiled::default()).await {
            Ok(ended) => ended,
            Err(e) => {
                warn!(task = %task.id, error = %Logged(&e), "Ending a task of a terminated run failed; it waits.");
                false
            }
        }
    }

    /// Answers the pending tasks of run `run_id` of `tenant` that the control log now ends;
    /// how many.
    pub async fn sweep(&self, tenant: &str, run_id: &str) -> Result<usize, StoreError> {
        let filter = Filter { run: Some(run_id.to_owned()), ..Filter::default() };
        let page = self.store.page(&self.pools, &filter, None, None, now_ms()).await?;
        let mut compiled = Compiled::default();
        let mut ended = 0;
        for task in page.tasks.iter().filter(|task| task.caller().tenant == tenant) {
            ended += usize::from(self.end_if_controlled(task, &mut compiled).await?);
        }
        Ok(ended)
    }

    /// Records `terminate` on `task` as the control's, if the view says its call is ended.
    async fn end_if_controlled(&self, task: &Task, compiled: &mut Compiled) -> Result<bool, StoreError> {
        let Some(control) = self.control() else { return Ok(false) };
        let Some(key) = task.request().and_then(|r| r.key.as_ref()) else { return Ok(false) };
        let Some(why) = ended(control, &control.view.read(), key, task, compiled) else { return Ok(false) };
        let verdict = Verdict {
            decision: Decision::Terminate,
            explanation: format!("The fleet's control ended this call: {why}."),
            decided_by: control.id.clone(),
            decided_at: now_ms(),
        };
        let recorded = matches!(self.write(task, verdict, None, By::Control).await?, Recorded::Decided(_));
        if recorded {
            info!(task = %task.id, correlation = %Logged(&task.correlation), why = %Logged(&why), "Task ended by the fleet's control.");
        }
        Ok(recorded)
    }
}

/// Why the call of `task` (key `key`) is ended as `state` stands, if it is: a switch thrown by
/// hand whatever the policy, else what the task's own policy makes of the run.
fn ended(
    control: &Control,
    state: &ControlState,
    key: &v1::CallKey,
    task: &Task,
    compiled: &mut Compiled,
) -> Option<String> {
    let run = state.run(&key.tenant, &key.run_id)?;
    let controlled = if run.switch.is_some() {
        state.switched(key, &task.pool)
    } else {
        let rules = compiled.rules(control.policy_dir.as_deref(), task)?;
        state.response(key, rules)
    };
    controlled.filter(|controlled| controlled.response == Response::Terminate).map(|controlled| controlled.why)
}

/// The control rules of the policies of tasks, compiled once each while they are looked at.
#[derive(Default)]
struct Compiled(HashMap<(String, bool), Option<Rules>>);

impl Compiled {
    /// The rules of `task`'s own policy: its inline text, or its name read in `dir`; `None`
    /// when it cannot be had (logged once).
    fn rules(&mut self, dir: Option<&Path>, task: &Task) -> Option<&Rules> {
        let (text, inline) = match task.request()?.policy.as_ref()?.source.as_ref()? {
            v1::policy::Source::Inline(text) => (text.clone(), true),
            v1::policy::Source::Name(name) => (name.clone(), false),
        };
        let kind = task.kind();
        self.0
            .entry((text, inline))
            .or_insert_with_key(|(text, inline)| {
                let compiled = if *inline {
                    Policy::parse("<inline>", text, kind).map_err(|e| e.to_string())
                } else {
                    named(dir, text).and_then(|(source, text)| Policy::parse(&source, &text, kind).map_err(|e| e.to_string()))
                };
                compiled
                    .map(|policy| policy.control().clone())
                    .inspect_err(|e| warn!(task = %task.id, error = %Logged(e), "The task's policy cannot be read; only switches by hand end it."))
                    .ok()
            })
            .as_ref()
    }
}

/// The text of the policy `name` in `dir` (`name`, `name.yaml`, `name.yml` or `name.json`),
/// as the workers find it.
fn named(dir: Option<&Path>, name: &str) -> Result<(String, String), String> {
    let dir = dir.ok_or_else(|| format!("policy '{name}' is named, but this service has no --policy-dir"))?;
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(format!("'{name}' is not a policy name"));
    }
    ["", ".yaml", ".yml", ".json"]
        .iter()
        .find_map(|ext| std::fs::read_to_string(dir.join(format!("{name}{ext}"))).ok())
        .map(|text| (name.to_owned(), text))
        .ok_or_else(|| format!("no policy named '{name}' in the policy directory"))
}

/// A person's text trimmed and checked: at most [`MAX_EXPLANATION`] characters, no NUL.
fn checked(what: &'static str, text: Option<String>) -> Result<String, Uncontrolled> {
    let text = text.map(|t| t.trim().to_owned()).unwrap_or_default();
    if text.chars().count() > MAX_EXPLANATION {
        return Err(Uncontrolled::TooLong(what));
    }
    if text.contains('\0') {
        return Err(Uncontrolled::Nul(what));
    }
    Ok(text)
}

/// A response's name as `airlock run` prints it: `human`, `none`, `terminate`.
fn response_name(response: ControlResponse) -> String {
    response.as_str_name().trim_start_matches("CONTROL_RESPONSE_").to_lowercase()
}

/// A run the watcher ends the tasks of, and what it had when it last did: a terminate switch,
/// and how many incidents.
type Mark = (bool, usize);

/// The runs whose pending tasks the log may end now: a terminate switch, or incidents and no
/// switch (a pause or another policy keeps the tasks).
fn marks(state: &ControlState) -> HashMap<(String, String), Mark> {
    state
        .runs()
        .filter_map(|run| {
            let terminate = run.switch.is_some_and(|s| s.response == Switch::Terminate);
            let counted = run.switch.is_none() && !run.incidents.is_empty();
            (terminate || counted)
                .then(|| ((run.tenant.to_owned(), run.run_id.to_owned()), (terminate, run.incidents.len())))
        })
        .collect()
}

/// Answers the pending tasks of the runs the control log ends, each time it changes what ends
/// a run (at once, then at most once per [`COALESCE`]), until `stop`; a run the store failed to sweep is swept again
/// after [`RETRY`]. Returns at once when the desk follows no log.
pub async fn watch(desk: Arc<Desk>, stop: CancellationToken) {
    let Some(control) = desk.control() else { return };
    let mut applied = control.view.applied();
    let mut swept: HashMap<(String, String), Mark> = HashMap::new();
    loop {
        let now = marks(&control.view.read());
        let mut failed = false;
        for (run, mark) in &now {
            if swept.get(run) == Some(mark) {
                continue;
            }
            match desk.sweep(&run.0, &run.1).await {
                Ok(ended) => {
                    if ended > 0 {
                        info!(run = %Logged(&run.1), tenant = %Logged(&run.0), ended, "Pending tasks of the run ended.");
                    }
                    swept.insert(run.clone(), *mark);
                }
                Err(e) => {
                    warn!(run = %Logged(&run.1), error = %Logged(&e), "Ending the pending tasks of a run failed; trying again.");
                    failed = true;
                }
            }
        }
        let kept: HashSet<&(String, String)> = now.keys().collect();
        swept.retain(|run, _| kept.contains(run));
        let looked = tokio::time::Instant::now();
        tokio::select! {
            () = stop.cancelled() => return,
            changed = applied.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(RETRY), if failed => {}
        }
        // Entries that arrive meanwhile mark the watch changed: the next look takes them all.
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(looked + COALESCE) => {}
        }
    }
}

#[cfg(test)]
mod tests;
