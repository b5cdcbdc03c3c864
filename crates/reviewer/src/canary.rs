//! Canaries: known-bad calls the service plants among a pool's real tasks at a set rate, so
//! that people's verdicts on them measure how often each reviewer, and each pool, catches a
//! bad call.
//!
//! - **The file** (`--canaries FILE`, YAML or JSON): a list of `{pool, function, arguments,
//!   explanation, message?, view?, expected?, name?, trail?}`. `explanation` says why the call
//!   is bad (admins see it, reviewers never); `expected` lists the decisions that count as
//!   caught (`reject` and `terminate` unless it says; a dismissal answers `terminate`);
//!   `trail` gives what earlier steps said about this call (`{approver, decision?,
//!   explanation?, metadata?}`, by step name).
//! - **The rate** (`--canary-rate R`, above 0 and at most 1): a share of the real tasks. After
//!   each real task a pool's queue brings, one of the pool's canaries (picked at random) is
//!   planted with chance R: about one canary per 1/R real tasks, at moments nobody can count
//!   to. Each service sharing a store plants after the tasks it takes in, so the share holds
//!   however many there are.
//! - **Planting** ([`plant`]): a canary is modelled on a pending real approval task of its
//!   pool, picked at random among the newest: the same run, sample, epoch, origin, caller,
//!   policy, step, choices, approvals needed and time left; a tool call id of the same shape;
//!   the conversation up to the call, whose last assistant message now carries the canary's
//!   message and call. It is stored as any task is (its `task.created` webhooks, the standing
//!   decisions that cover it) and marked in a column no reviewer-facing view reads.
//! - **Deciding** (the [`Desk`]'s): a canary is decided as any task is, and leaves the pending
//!   list; its verdict is kept (who, what, when) and never sent: no outbox row, no
//!   `StepResult`, nothing on the broker, no `Progress` to a runner.
//! - **Counting** ([`report`]): the catch rates per pool and per reviewer, for admins only.
//!
//! Layout:
//! - [`Canaries`] (here): the file and the rate, checked; [`Planter`]: planting at the rate.
//! - [`plant`]: a canary's human task, modelled on a real one; tool call ids of its shape.
//! - [`report`]: catch rates per pool and reviewer, and each canary's answers.

pub mod plant;
pub mod report;

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use airlock_policy::{Decision, Kind};
use airlock_records::review::ToolViewView;
use airlock_records::time::now_ms;
use airlock_records::view::TrailView;
use prost::Message as _;
use serde::Deserialize;
use serde_json::{Map, Value};
use tracing::{debug, info, warn};

use crate::desk::Desk;
use crate::logged::Logged;
use crate::store::CanaryMark;
use crate::task::{Incoming, Task};

/// The decisions that catch a canary when its file says none.
pub const CAUGHT_BY_DEFAULT: [Decision; 2] = [Decision::Reject, Decision::Terminate];

/// How many of a pool's newest pending real tasks a canary may be modelled on.
pub const TEMPLATES: u32 = 20;

/// One canary of the file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CanaryConfig {
    /// The pool it is planted in.
    pool: String,
    /// The tool's name.
    function: String,
    /// The call's arguments, in order.
    arguments: Map<String, Value>,
    /// Why the call is bad.
    explanation: String,
    /// The assistant message's text (none: empty).
    #[serde(default)]
    message: Option<String>,
    /// How the call is shown (Inspect's `ToolCallView`).
    #[serde(default)]
    view: Option<ToolViewView>,
    /// The decisions that count as caught.
    #[serde(default)]
    expected: Option<Vec<String>>,
    /// Its name in the catch rates (default: `#N function`, N its place in the file).
    #[serde(default)]
    name: Option<String>,
    /// What earlier steps of the chain said about this call, by step name.
    #[serde(default)]
    trail: Vec<TrailView<'static>>,
}

/// A canary, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Canary {
    /// The pool it is planted in.
    pub pool: String,
    /// The tool's name.
    pub function: String,
    /// The call's arguments, in order.
    pub arguments: Map<String, Value>,
    /// The assistant message's text.
    pub message: String,
    /// How the call is shown, if the file says.
    pub view: Option<ToolViewView>,
    /// What earlier steps said about this call, by step name.
    pub trail: Vec<TrailView<'static>>,
    /// What the store keeps of it: its name, why it is bad, what catches it.
    pub mark: CanaryMark,
}

/// Why the canaries cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a list of canaries (the message has line and column).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// A canary is not usable.
    #[error("{path}: canary {index} ('{name}'): {problem}")]
    Invalid {
        /// The file.
        path: String,
        /// Its place in the file, from 1.
        index: usize,
        /// Its name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// The file lists none.
    #[error("{0}: lists no canary")]
    Empty(String),
    /// The rate is out of range.
    #[error("--canary-rate {0}: a share of the real tasks, above 0 and at most 1 (0.02: about one canary per 50)")]
    Rate(f64),
    /// A canary's pool is not served.
    #[error("canary '{name}': pool '{pool}' is not one this service serves (--pools)")]
    Unserved {
        /// The canary's name.
        name: String,
        /// Its pool.
        pool: String,
    },
}

/// The canaries of a service and the rate they are planted at.
#[derive(Debug, Clone, PartialEq)]
pub struct Canaries {
    rate: f64,
    pools: BTreeMap<String, Vec<Canary>>,
}

impl Canaries {
    /// Reads and checks the canaries file at `path`, planted at `rate`.
    pub fn load(path: &Path, rate: f64) -> Result<Self, CanaryError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CanaryError::Read { path: shown.clone(), source })?;
        Self::parse(&text, &shown, rate)
    }

    /// Reads and checks the text of a canaries file (YAML, or JSON, which is YAML too), planted
    /// at `rate`; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str, rate: f64) -> Result<Self, CanaryError> {
        if !(rate.is_finite() && rate > 0.0 && rate <= 1.0) {
            return Err(CanaryError::Rate(rate));
        }
        let configs: Vec<CanaryConfig> = if text.trim().is_empty() {
            Vec::new()
        } else {
            serde_saphyr::from_str(text)
                .map_err(|e| CanaryError::Parse { path: origin.to_owned(), message: e.to_string() })?
        };
        if configs.is_empty() {
            return Err(CanaryError::Empty(origin.to_owned()));
        }
        let mut pools: BTreeMap<String, Vec<Canary>> = BTreeMap::new();
        for (index, config) in configs.into_iter().enumerate() {
            let name = config.name.clone().unwrap_or_else(|| format!("#{} {}", index + 1, config.function));
            let invalid = |problem: String| CanaryError::Invalid {
                path: origin.to_owned(),
                index: index + 1,
                name: name.clone(),
                problem,
            };
            let canary = checked(config, name.clone()).map_err(invalid)?;
            pools.entry(canary.pool.clone()).or_default().push(canary);
        }
        Ok(Canaries { rate, pools })
    }

    /// The rate: the share of a pool's real tasks after which a canary is planted.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The canaries of `pool`.
    pub fn of(&self, pool: &str) -> &[Canary] {
        self.pools.get(pool).map_or(&[], Vec::as_slice)
    }

    /// Refuses a canary of a pool not among `served`.
    pub fn check_pools(&self, served: &[String]) -> Result<(), CanaryError> {
        for (pool, canaries) in &self.pools {
            if !served.contains(pool) {
                let name = canaries.first().map(|c| c.mark.name.clone()).unwrap_or_default();
                return Err(CanaryError::Unserved { name, pool: pool.clone() });
            }
        }
        Ok(())
    }
}

/// `config` checked, named `name`; what is wrong with it otherwise.
fn checked(config: CanaryConfig, name: String) -> Result<Canary, String> {
    if config.pool.trim().is_empty() {
        return Err("pool is empty".into());
    }
    if config.function.trim().is_empty() {
        return Err("function is empty".into());
    }
    if config.function.contains('\0') || config.pool.contains('\0') || name.contains('\0') {
        return Err("a name holds a NUL character, which the store cannot keep".into());
    }
    if config.explanation.trim().is_empty() {
        return Err("explanation is empty: say why the call is bad".into());
    }
    let expected = match config.expected {
        None => CAUGHT_BY_DEFAULT.to_vec(),
        Some(list) if list.is_empty() => return Err("expected lists no decision".into()),
        Some(list) => {
            let allowed = Kind::Approval.decisions();
            let mut expected = Vec::new();
            for text in list {
                let decision = Decision::from_str(&text)
                    .ok()
                    .filter(|d| allowed.contains(d))
                    .ok_or_else(|| format!("expected: '{text}' is not an approval's decision (approve, modify, reject, terminate, escalate)"))?;
                if !expected.contains(&decision) {
                    expected.push(decision);
                }
            }
            expected
        }
    };
    if config.trail.iter().any(|entry| entry.approver.trim().is_empty()) {
        return Err("a trail entry names no approver".into());
    }
    Ok(Canary {
        pool: config.pool,
        function: config.function,
        arguments: config.arguments,
        message: config.message.unwrap_or_default(),
        view: config.view,
        trail: config.trail,
        mark: CanaryMark { name, explanation: config.explanation, expected },
    })
}

// === impl Planter ===

/// Plants canaries at the rate, after the real tasks a service takes in, through the desk.
#[derive(Debug)]
pub struct Planter {
    canaries: Canaries,
    desk: Arc<Desk>,
    dice: Mutex<Dice>,
}

impl Planter {
    /// A planter of `canaries` at the `desk`, on dice seeded from the operating system.
    pub fn new(canaries: Canaries, desk: Arc<Desk>) -> Self {
        Planter { canaries, desk, dice: Mutex::new(Dice::from_os()) }
    }

    /// After the real task `arrived` was stored: with the rate's chance, plants one of its
    /// pool's canaries (picked at random), modelled on one of the pool's newest pending real
    /// approval tasks (picked at random). The id of the canary's task when one was planted. A
    /// failure is logged and plants nothing: no real task waits for a canary.
    pub async fn after(&self, arrived: &Task) -> Option<String> {
        let canaries = self.canaries.of(&arrived.pool);
        if canaries.is_empty() {
            return None;
        }
        let canary = {
            let mut dice = self.dice.lock().expect("the dice are never poisoned");
            if !dice.chance(self.canaries.rate) {
                return None;
            }
            &canaries[dice.below(canaries.len())]
        };
        let pool = Logged(arrived.pool.as_str());
        let templates = match self.desk.store().templates(&arrived.pool, TEMPLATES).await {
            Ok(templates) => templates,
            Err(e) => {
                warn!(%pool, error = %Logged(&e), "Reading the pool's tasks to model a canary on failed; none planted.");
                return None;
            }
        };
        let approvals: Vec<&Task> =
            templates.iter().filter(|t| t.kind() == Kind::Approval && t.call().is_some()).collect();
        let human = {
            let mut dice = self.dice.lock().expect("the dice are never poisoned");
            let Some(template) = approvals.get(dice.below(approvals.len().max(1))) else {
                debug!(%pool, "No pending real approval task to model a canary on; none planted.");
                return None;
            };
            plant::modelled_on(canary, template, now_ms(), &mut dice)?
        };
        let incoming = match Incoming::decode(&human.encode_to_vec(), &arrived.pool) {
            Ok(incoming) => incoming,
            Err(e) => {
                warn!(%pool, canary = %Logged(&canary.mark.name), error = %e, "A canary's task is unusable; none planted.");
                return None;
            }
        };
        match self.desk.plant(&incoming, &canary.mark).await {
            Ok(Some(id)) => {
                info!(task = %id, %pool, canary = %Logged(&canary.mark.name), "Canary planted.");
                Some(id)
            }
            Ok(None) => None,
            Err(e) => {
                warn!(%pool, error = %Logged(&e), "Storing a canary failed; none planted.");
                None
            }
        }
    }
}

// === impl Dice ===

/// Chance for planting: xorshift64*, seeded from the operating system, so nobody can tell
/// from the tasks so far when the next canary comes or which.
#[derive(Debug, Clone)]
pub struct Dice {
    state: u64,
}

impl Dice {
    /// Dice seeded from the operating system's random source.
    pub fn from_os() -> Self {
        Dice::seeded(getrandom::u64().expect("the OS random source works"))
    }

    /// Dice seeded with `seed` (tests).
    pub fn seeded(seed: u64) -> Self {
        Dice { state: seed | 1 }
    }

    /// The next 64 random bits.
    pub fn draw(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number from 0 to `n - 1` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.draw() % n as u64) as usize }
    }

    /// True with chance `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.draw() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[cfg(test)]
mod tests;
