//! An audit budget: the share `b` of a step's calls passed on to the steps after it (people,
//! usually), chosen among the highest-scored.
//!
//! [`Budgets`] holds a monitor's budgets, one per step and scope (the run, or [`STEP_SCOPE`]),
//! with their gauges; what it decides it also sends, as [`Entry`]s, to the outbox it was given,
//! and it counts the entries other monitor processes sent ([`Budgets::record`]), so that
//! every process of a step decides on the fleet's scores.
//!
//! A [`Budget`] is pure (the same scores in the same order always give the same decisions). It
//! counts every score the step gave within its scope, its own and those other
//! monitor processes report ([`Budget::record`]), and how many of them were passed on. It
//! decides in one of two [`Mode`]s:
//!
//! - **calibrated**: the threshold is fixed (`audit_threshold`, from an honest log by
//!   `airlock monitor calibrate`); a score above it is passed on. The budget only measures.
//! - **paced**: the threshold is learned from the scores seen so far, and a call is passed on
//!   only while there is credit.
//!
//! The paced rule, for a budget `b` after `n` scores:
//!
//! - **Credit** is a bucket of calls that may be passed on: it starts at the allowance
//!   `1 + b × warmup` (about 3), gains `b` with every score seen (in the fleet), loses 1 with
//!   every call passed on, and holds at most [`CAPACITY`] (5). A call is passed on only with a
//!   whole call of credit, so over any stretch of `w` calls at most `5 + b × w` are passed on:
//!   no burst at the start, nor after a quiet stretch.
//! - **The threshold** is the `1 - b'` quantile of the scores seen (held to a hundredth of a
//!   point: exact for the scores models give, to one or two decimals), raised by a margin of two
//!   standard errors of that estimate, `2 √(b(1 - b)/n)` in share, so that with few scores it
//!   errs high. `b'` is `b`, plus up to `0.8 b` while credit is banked (`b × (credit - 1) /
//!   5`): what a high threshold left unspent is spent on the next-highest calls instead of being
//!   lost. A call scored at or above the threshold is passed on (ties first come, as far as the
//!   credit goes).
//! - **Before it has seen enough scores** (`warmup = ⌈2 / b⌉`: 40 at 5%, 200 at 1%), the
//!   threshold is at least `10 × (1 - b)` (9.5 at 5%), the quantile of scores spread evenly
//!   over the scale: only calls scored that high are passed on, within the allowance.
//!
//! **It converges** as the empirical quantile does: the margin shrinks as `1/√n`, so the
//! threshold tends to the `1 - b` quantile and the share above it to `b`, which the credit
//! then neither holds back nor adds to. With scores spread evenly over 0–10, two processes each hearing of the other's
//! decisions 25 calls late passed on 4.4–5.1% of 2,000 calls at `b` = 5% (300 runs), at most
//! 7.5% of any tenth of them, and in 293 runs of 300 only calls from the top tenth of the
//! scores (in the others, one call just below it). Reports that come later let both spend the
//! same credit: at 50 to 100 calls late, a tenth reached 8.5%.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_telemetry::metrics::{BudgetLabels, Metrics};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use crate::params::MAX_SCORE;

/// The scope key of `budget_scope: step`: one budget across runs.
pub const STEP_SCOPE: &str = "*";

/// Scores are held in hundredths of a point.
const HUNDREDTHS: f64 = 100.0;

/// Scores a paced budget sees, times `1 / b`, before it trusts its quantile.
const WARMUP: f64 = 2.0;

/// Budgets a monitor holds at most; past it, the one used longest ago is forgotten (its run is
/// most likely over) and its gauges removed.
pub const MAX_BUDGETS: usize = 10_000;

/// The most credit a paced budget banks, in calls.
pub const CAPACITY: f64 = 5.0;

/// Standard errors of the quantile's estimate that a paced threshold is raised by.
const MARGIN: f64 = 2.0;

/// How a budget's threshold is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Learned from the scores seen so far, and paced.
    Paced,
    /// Fixed: a score above it is passed on.
    Calibrated {
        /// The `audit_threshold`.
        threshold: f64,
    },
}

impl Mode {
    /// The mode as the answer's metadata names it: `paced` or `calibrated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Paced => "paced",
            Mode::Calibrated { .. } => "calibrated",
        }
    }
}

/// Where a budget stands, for metrics and the answer's metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct State {
    /// Scores seen.
    pub seen: u64,
    /// Calls passed on.
    pub passed: u64,
    /// `passed / seen` (0 before any score).
    pub share: f64,
    /// The threshold now: paced, a score at or above it may be passed on; calibrated, a score
    /// above it is.
    pub threshold: f64,
    /// `b × seen - passed`: what may still be passed on; negative when ahead of the budget, a
    /// paced one by its starting credit at most (more only when reports come late), a
    /// calibrated one without bound.
    pub left: f64,
}

/// The scores of one step within one scope, how many calls were passed on, and the credit.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The share to pass on, 0 < b < 1.
    budget: f64,
    /// Scores seen, by hundredths of a point.
    scores: BTreeMap<u16, u64>,
    seen: u64,
    passed: u64,
    /// Calls that may be passed on now (paced).
    credit: f64,
}

// === impl Budget ===

impl Budget {
    /// An empty budget of `budget` (0 < b < 1).
    pub fn new(budget: f64) -> Self {
        Budget { budget, scores: BTreeMap::new(), seen: 0, passed: 0, credit: allowance(budget) }
    }

    /// The share it passes on.
    pub fn budget(&self) -> f64 {
        self.budget
    }

    /// Passes on `budget` from now on (the step's parameter changed); what was seen stays.
    pub fn set_budget(&mut self, budget: f64) {
        self.budget = budget;
    }

    /// Counts a score given elsewhere (another monitor process), and whether that call was
    /// passed on.
    pub fn record(&mut self, score: f64, passed: bool) {
        self.count(score);
        if passed {
            self.pass();
        }
    }

    /// Whether the call scored `score` is passed on: counts the score, and the call when it is
    /// passed on.
    pub fn decide(&mut self, mode: Mode, score: f64) -> bool {
        self.count(score);
        let passed = match mode {
            Mode::Calibrated { threshold } => score > threshold,
            Mode::Paced => self.credit >= 1.0 && hundredths(score) >= self.paced_threshold(),
        };
        if passed {
            self.pass();
        }
        passed
    }

    /// Where the budget stands under `mode`.
    pub fn state(&self, mode: Mode) -> State {
        let threshold = match mode {
            Mode::Calibrated { threshold } => threshold,
            Mode::Paced => f64::from(self.paced_threshold()) / HUNDREDTHS,
        };
        State {
            seen: self.seen,
            passed: self.passed,
            share: if self.seen == 0 { 0.0 } else { self.passed as f64 / self.seen as f64 },
            threshold,
            left: self.budget * self.seen as f64 - self.passed as f64,
        }
    }

    fn count(&mut self, score: f64) {
        *self.scores.entry(hundredths(score)).or_default() += 1;
        self.seen += 1;
        self.credit = (self.credit + self.budget).min(CAPACITY);
    }

    fn pass(&mut self) {
        self.passed += 1;
        self.credit -= 1.0;
    }

    /// The paced threshold, in hundredths (see the module's documentation).
    fn paced_threshold(&self) -> u16 {
        let b = self.budget;
        let n = self.seen.max(1) as f64;
        // Credit banked beyond one call raises the share aimed at, up to 1.8 b.
        let spend = b * (self.credit - 1.0).max(0.0) / CAPACITY;
        let level = 1.0 - b - spend + MARGIN * (b * (1.0 - b) / n).sqrt();
        let quantile = self.quantile(level.clamp(0.0, 1.0));
        if n < warmup(b) { quantile.max(((MAX_SCORE * (1.0 - b)) * HUNDREDTHS).ceil() as u16) } else { quantile }
    }

    /// The lowest score (in hundredths) that at least `q` of the scores seen are at or below;
    /// 0 before any.
    fn quantile(&self, q: f64) -> u16 {
        // The rank of the quantile, from 1; a hair's tolerance so that 0.95 × 2000 is 1900.
        let rank = ((q * self.seen as f64) - 1e-9).ceil().max(1.0) as u64;
        let mut below = 0;
        for (&score, &count) in &self.scores {
            below += count;
            if below >= rank {
                return score;
            }
        }
        0
    }
}

/// One score of a budgeted step, as a monitor process sends it to the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The step.
    pub step: String,
    /// The budget's scope: the run, or [`STEP_SCOPE`].
    pub scope: String,
    /// The step's `audit_budget`.
    pub audit_budget: f64,
    /// The score.
    pub score: f64,
    /// Whether the call was passed on.
    pub passed: bool,
}

/// A monitor's budgets by step and scope, with their gauges in the monitor's metrics.
#[derive(Debug)]
pub struct Budgets {
    slots: Mutex<Slots>,
    metrics: Arc<Metrics>,
    outbox: Option<UnboundedSender<Entry>>,
}

#[derive(Debug, Default)]
struct Slots {
    by_key: HashMap<(String, String), Slot>,
    /// Counts uses, to find the budget used longest ago.
    clock: u64,
}

#[derive(Debug)]
struct Slot {
    budget: Budget,
    /// The mode of this process's last decision, for the gauges; none while only others' scores came.
    mode: Option<Mode>,
    used: u64,
}

// === impl Budgets ===

impl Budgets {
    /// No budgets yet; gauges go to `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Budgets { slots: Mutex::default(), metrics, outbox: None }
    }

    /// Sends every score this process gives under a budget to `outbox`, for the other
    /// processes of the step.
    pub fn with_outbox(mut self, outbox: UnboundedSender<Entry>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// Whether the call scored `score` by `step`, within `scope`, is passed on under a budget of
    /// `budget` in `mode`; with where the budget then stands.
    pub fn decide(&self, step: &str, scope: &str, budget: f64, mode: Mode, score: f64) -> (bool, State) {
        let (passed, state) = self.update(step, scope, budget, |slot| slot.own(budget, mode).decide(mode, score));
        self.send(step, scope, budget, score, passed);
        (passed, state)
    }

    /// Counts a score this process gave that ended its call outright (`reject_above`,
    /// `terminate_above`): seen, not passed on.
    pub fn ended(&self, step: &str, scope: &str, budget: f64, mode: Mode, score: f64) -> State {
        let ((), state) = self.update(step, scope, budget, |slot| slot.own(budget, mode).record(score, false));
        self.send(step, scope, budget, score, false);
        state
    }

    /// Counts a score another monitor process gave (never one of this process's own, which it
    /// counted when it decided).
    pub fn record(&self, entry: &Entry) {
        self.update(&entry.step, &entry.scope, entry.audit_budget, |slot| {
            slot.budget.record(entry.score, entry.passed)
        });
    }

    /// Where the budget of `step` within `scope` stands, once this process decided under it.
    pub fn state(&self, step: &str, scope: &str) -> Option<State> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.by_key.get(&(step.to_owned(), scope.to_owned()))?;
        Some(slot.budget.state(slot.mode?))
    }

    /// Applies `change` to the budget of `step` within `scope` (made with `budget` if new),
    /// moves its gauges and forgets the budget used longest ago past [`MAX_BUDGETS`].
    fn update<R>(&self, step: &str, scope: &str, budget: f64, change: impl FnOnce(&mut Slot) -> R) -> (R, State) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.clock += 1;
        let used = slots.clock;
        let key = (step.to_owned(), scope.to_owned());
        let slot =
            slots.by_key.entry(key.clone()).or_insert_with(|| Slot { budget: Budget::new(budget), mode: None, used });
        slot.used = used;
        let result = change(slot);
        let state = slot.budget.state(slot.mode.unwrap_or(Mode::Paced));
        if slot.mode.is_some() {
            let labels = BudgetLabels { step: key.0, run: key.1 };
            self.metrics.budget_share.get_or_create(&labels).set(state.share);
            self.metrics.budget_threshold.get_or_create(&labels).set(state.threshold);
            self.metrics.budget_left.get_or_create(&labels).set(state.left);
        }
        if slots.by_key.len() > MAX_BUDGETS
            && let Some(oldest) = slots.by_key.iter().min_by_key(|(_, slot)| slot.used).map(|(key, _)| key.clone())
        {
            slots.by_key.remove(&oldest);
            let labels = BudgetLabels { step: oldest.0, run: oldest.1 };
            for gauge in [&self.metrics.budget_share, &self.metrics.budget_threshold, &self.metrics.budget_left] {
                gauge.remove(&labels);
            }
        }
        (result, state)
    }

    fn send(&self, step: &str, scope: &str, audit_budget: f64, score: f64, passed: bool) {
        if let Some(outbox) = &self.outbox {
            let entry = Entry { step: step.to_owned(), scope: scope.to_owned(), audit_budget, score, passed };
            // Nobody listening any more: the monitor is stopping.
            let _ = outbox.send(entry);
        }
    }
}

// === impl Slot ===

impl Slot {
    /// The budget, for a decision of this process under `budget` and `mode`.
    fn own(&mut self, budget: f64, mode: Mode) -> &mut Budget {
        self.mode = Some(mode);
        self.budget.set_budget(budget);
        &mut self.budget
    }
}

/// A score in hundredths of a point, within the scale (a hair's tolerance, so that 0.29 is 29).
fn hundredths(score: f64) -> u16 {
    ((score.clamp(0.0, MAX_SCORE) * HUNDREDTHS) + 1e-6).floor() as u16
}

/// Scores seen before a paced budget trusts its quantile: `⌈2 / b⌉`.
fn warmup(budget: f64) -> f64 {
    (WARMUP / budget).ceil()
}

/// The credit a paced budget starts with: `1 + b × warmup`.
fn allowance(budget: f64) -> f64 {
    1.0 + budget * warmup(budget)
}

#[cfg(test)]
mod tests;
