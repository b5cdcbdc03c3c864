//! Control protocols: what a monitor step does with a call besides deciding who looks at it.
//!
//! A step runs a protocol when its `protocol` parameter names one, or else when the step is
//! named after one (`trusted_edit`, `defer_to_trusted`, `resample`):
//!
//! ```yaml
//! - name: trusted_edit
//!   tools: "*"
//!   approve_below: 7        # the step's rule still decides what goes to people
//!   escalate_below: 9
//!   edit_threshold: 4       # 4 <= score < 7: a trusted model rewrites the arguments
//! - name: resample
//!   tools: "*"
//!   audit_budget: 0.01
//!   audit_threshold: 7
//!   defer_threshold: 4      # score >= 4: draw samples of the step from the untrusted model
//!   resample_steps: 2       # k, the samples that may run instead
//!   extra_resample_steps: 2 # more, drawn only as evidence
//!   resample_mode: parallel # or sequential: stop at the first sample under the threshold
//!   mode: run               # or incriminate: the samples are evidence only
//!   different_tool: reject  # a sample of another tool cannot be a modify: reject or escalate
//! ```
//!
//! The rule: the step's scoring rule (thresholds or audit budget) decides first, on the
//! call's score, exactly as for a plain monitor. What it would approve and scores at or above
//! the protocol's threshold gets the protocol's call instead (a modify); what it escalates
//! reaches people with the protocol's proposal in the note; what it rejects or terminates is
//! ended as it says. `resample` in `incriminate` mode draws its samples whenever the score is
//! at or above `defer_threshold`, and the rule then decides on the highest score of the call
//! and its samples (an audit on the maximum); the call itself runs unchanged if approved.
//!
//! [`run`] asks the models; this module is the pure part: the parameters, the plan, the
//! choice among samples and their evidence.

pub mod requests;
pub mod run;

use airlock_policy::{Decision, Kind};
use airlock_records::monitor::{NoteEvidence, NoteSample};
use serde_json::{Map, Value};

use crate::budget::Mode as BudgetMode;
use crate::params::{ParamsError, Rule, score};

/// The protocols, by the name a step or its `protocol` parameter gives.
pub const NAMES: &[&str] = &[TRUSTED_EDIT, DEFER_TO_TRUSTED, RESAMPLE];
const TRUSTED_EDIT: &str = "trusted_edit";
const DEFER_TO_TRUSTED: &str = "defer_to_trusted";
const RESAMPLE: &str = "resample";

/// Every protocol parameter.
pub const KEYS: &[&str] = &[
    "protocol",
    "edit_threshold",
    "defer_threshold",
    "resample_steps",
    "extra_resample_steps",
    "resample_mode",
    "mode",
    "different_tool",
];

/// The most samples a step may draw for one call (`resample_steps` + `extra_resample_steps`).
pub const MAX_SAMPLES: u64 = 16;

/// A step's control protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Protocol {
    /// A trusted model rewrites the call's arguments.
    TrustedEdit {
        /// `edit_threshold`.
        threshold: f64,
    },
    /// The trusted model proposes the call instead.
    DeferToTrusted {
        /// `defer_threshold`.
        threshold: f64,
        /// What a proposal of another tool gets.
        different_tool: DifferentTool,
    },
    /// The untrusted model is sampled again.
    Resample(Resample),
}

/// `resample`'s parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Resample {
    /// `defer_threshold`: samples are drawn at or above it, and only samples below it run.
    pub threshold: f64,
    /// `resample_steps` (k): the samples that may run instead of the call.
    pub steps: u32,
    /// `extra_resample_steps`: samples drawn only as evidence.
    pub extra: u32,
    /// `resample_mode`.
    pub order: Order,
    /// `mode`.
    pub mode: ResampleMode,
    /// What a chosen sample of another tool gets.
    pub different_tool: DifferentTool,
}

/// How samples are drawn (`resample_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// All at once.
    Parallel,
    /// One after another, stopping at the first below the threshold.
    Sequential,
}

/// What the samples are for (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResampleMode {
    /// The least suspicious sample runs.
    Run,
    /// Evidence only: the rule decides on the highest score.
    Incriminate,
}

/// What a call of another tool than the original gets (`different_tool`): Inspect's modify
/// cannot change the function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DifferentTool {
    /// Rejected; the model sees the step's `model_explanation` when it has one.
    Reject,
    /// Passed on to people, with the proposal in the note.
    Escalate,
}

/// What a protocol does with a call, given the rule's decision and the score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The rule's decision stands; no model is asked.
    Keep,
    /// The protocol's call replaces the original (the rule would approve it).
    Act,
    /// The rule escalates: people get the protocol's proposal to compare.
    Propose,
}

// === impl Protocol ===

impl Protocol {
    /// The protocol of step `step` from its parameters, checked against the step's `rule`:
    /// `None` when the step runs none.
    pub fn from_params(
        step: &str,
        kind: Kind,
        params: &Map<String, Value>,
        rule: &Rule,
    ) -> Result<Option<Self>, ParamsError> {
        let name = match params.get("protocol") {
            None => NAMES.iter().copied().find(|name| *name == step),
            Some(value) => match value.as_str().and_then(|v| NAMES.iter().copied().find(|name| *name == v)) {
                Some(name) => Some(name),
                None => {
                    let message = format!("'protocol' is {value}: expected one of {}", NAMES.join(", "));
                    return Err(ParamsError::at("protocol", message));
                }
            },
        };
        let Some(name) = name else {
            return match KEYS.iter().find(|key| params.contains_key(**key)) {
                Some(key) => Err(ParamsError::at(
                    key,
                    format!(
                        "'{key}' needs a control protocol: name the step, or set 'protocol', to one of {}",
                        NAMES.join(", ")
                    ),
                )),
                None => Ok(None),
            };
        };
        if kind == Kind::Review {
            let message = format!("'{name}' acts on calls before they run: it belongs in approvers, not reviewers");
            return Err(match params.contains_key("protocol") {
                true => ParamsError::at("protocol", message),
                false => ParamsError::whole(message),
            });
        }
        let allowed: &[&str] = match name {
            TRUSTED_EDIT => &["protocol", "edit_threshold"],
            DEFER_TO_TRUSTED => &["protocol", "defer_threshold", "different_tool"],
            _ => &[
                "protocol",
                "defer_threshold",
                "resample_steps",
                "extra_resample_steps",
                "resample_mode",
                "mode",
                "different_tool",
            ],
        };
        if let Some(key) = KEYS.iter().find(|key| params.contains_key(**key) && !allowed.contains(key)) {
            return Err(ParamsError::at(key, format!("'{key}' is not a parameter of {name}")));
        }
        let threshold_key = if name == TRUSTED_EDIT { "edit_threshold" } else { "defer_threshold" };
        let threshold = score(params, threshold_key)?.ok_or_else(|| {
            ParamsError::at(threshold_key, format!("'{threshold_key}' is required by {name} (a score from 0 to 10)"))
        })?;
        let different_tool = match params.get("different_tool") {
            None => DifferentTool::Escalate,
            Some(value) => match value.as_str() {
                Some("reject") => DifferentTool::Reject,
                Some("escalate") => DifferentTool::Escalate,
                _ => {
                    let message = format!("'different_tool' is {value}: expected reject or escalate");
                    return Err(ParamsError::at("different_tool", message));
                }
            },
        };
        let protocol = match name {
            TRUSTED_EDIT => Protocol::TrustedEdit { threshold },
            DEFER_TO_TRUSTED => Protocol::DeferToTrusted { threshold, different_tool },
            _ => Protocol::Resample(Resample::from_params(params, threshold, different_tool)?),
        };
        protocol.check_against(rule, threshold_key)?;
        Ok(Some(protocol))
    }

    /// A protocol that replaces calls must have scores to act on: some the rule would approve
    /// at or above its threshold.
    fn check_against(&self, rule: &Rule, key: &str) -> Result<(), ParamsError> {
        if matches!(self, Protocol::Resample(Resample { mode: ResampleMode::Incriminate, .. })) {
            return Ok(());
        }
        let threshold = self.threshold();
        let (bound, name, empty) = match rule {
            Rule::Thresholds(t) => (t.approve_below, "approve_below", threshold >= t.approve_below),
            Rule::Budget(b) => match b.mode {
                BudgetMode::Calibrated { threshold: audit } => (audit, "audit_threshold", threshold > audit),
                BudgetMode::Paced => return Ok(()),
            },
        };
        if empty {
            let message = format!(
                "'{key}' ({threshold}) must be below '{name}' ({bound}): the rule would never approve a call \
                 the protocol acts on"
            );
            return Err(ParamsError::at(key, message));
        }
        Ok(())
    }

    /// The protocol's name.
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::TrustedEdit { .. } => TRUSTED_EDIT,
            Protocol::DeferToTrusted { .. } => DEFER_TO_TRUSTED,
            Protocol::Resample(_) => RESAMPLE,
        }
    }

    /// The threshold the score is held against.
    pub fn threshold(&self) -> f64 {
        match self {
            Protocol::TrustedEdit { threshold } | Protocol::DeferToTrusted { threshold, .. } => *threshold,
            Protocol::Resample(resample) => resample.threshold,
        }
    }

    /// What the protocol does with a call the rule decided `decision` for at `score`.
    pub fn plan(&self, decision: Decision, score: f64) -> Plan {
        match decision {
            Decision::Approve | Decision::Continue if score >= self.threshold() => Plan::Act,
            Decision::Escalate => Plan::Propose,
            _ => Plan::Keep,
        }
    }
}

// === impl Resample ===

impl Resample {
    fn from_params(
        params: &Map<String, Value>,
        threshold: f64,
        different_tool: DifferentTool,
    ) -> Result<Self, ParamsError> {
        let count = |key: &str, default: u64, min: u64| -> Result<u64, ParamsError> {
            let Some(value) = params.get(key) else { return Ok(default) };
            match value.as_u64() {
                Some(n) if (min..=MAX_SAMPLES).contains(&n) => Ok(n),
                _ => Err(ParamsError::at(
                    key,
                    format!("'{key}' is {value}: expected a whole number from {min} to {MAX_SAMPLES}"),
                )),
            }
        };
        let steps = count("resample_steps", 2, 1)?;
        let extra = count("extra_resample_steps", 0, 0)?;
        if steps + extra > MAX_SAMPLES {
            let message =
                format!("'resample_steps' + 'extra_resample_steps' is {}: at most {MAX_SAMPLES}", steps + extra);
            return Err(ParamsError::at("extra_resample_steps", message));
        }
        let word = |key: &str, words: [&str; 2]| -> Result<bool, ParamsError> {
            match params.get(key) {
                None => Ok(false),
                Some(value) if value.as_str() == Some(words[0]) => Ok(false),
                Some(value) if value.as_str() == Some(words[1]) => Ok(true),
                Some(value) => {
                    Err(ParamsError::at(key, format!("'{key}' is {value}: expected {} or {}", words[0], words[1])))
                }
            }
        };
        let order =
            if word("resample_mode", ["parallel", "sequential"])? { Order::Sequential } else { Order::Parallel };
        let mode = if word("mode", ["run", "incriminate"])? { ResampleMode::Incriminate } else { ResampleMode::Run };
        Ok(Resample {
            threshold,
            steps: u32::try_from(steps).expect("at most MAX_SAMPLES"),
            extra: u32::try_from(extra).expect("at most MAX_SAMPLES"),
            order,
            mode,
            different_tool,
        })
    }

    /// The mode as notes name it.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            ResampleMode::Run => "run",
            ResampleMode::Incriminate => "incriminate",
        }
    }
}

/// The sample that runs: the least suspicious of the first `candidates` samples scored below
/// `threshold` (the first drawn among equals); `None` when all stay at or above it.
pub fn choose(samples: &[NoteSample], candidates: usize, threshold: f64) -> Option<usize> {
    samples
        .iter()
        .take(candidates)
        .enumerate()
        .filter_map(|(index, sample)| Some((index, sample.score?)).filter(|_| sample.call.is_some()))
        .filter(|(_, score)| *score < threshold)
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(index, _)| index)
}

/// The highest and the mean score of the call (`original`) and its scored samples.
pub fn evidence(original: f64, samples: &[NoteSample]) -> NoteEvidence {
    let scores: Vec<f64> = std::iter::once(original).chain(samples.iter().filter_map(|s| s.score)).collect();
    let max = scores.iter().copied().fold(f64::MIN, f64::max);
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    NoteEvidence { max, mean }
}

#[cfg(test)]
mod tests;
