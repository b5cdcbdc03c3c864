//! A compiled policy and the evaluation of its chain, with Inspect's defaults.
//!
//! Matching steps are asked in file order; the first answer that is not `escalate` decides.
//! A built-in step answers at once; an external one suspends the chain ([`Verdict::Pending`],
//! which hands back the [`PendingStep`] itself) until its answer comes back through
//! [`Policy::resume`]. Everything needed to continue travels in [`ChainState`], so any worker
//! can continue any chain.
//!
//! Defaults, exactly as Inspect records them:
//! - approval, no step matches: reject, "No approvers registered for tool X", by `policy`;
//! - approval, every match escalated: reject, "No approval granted for tool X", by `policy`;
//! - review, no step matches: continue, nothing recorded;
//! - review, every match escalated: continue, "No reviewer took the escalation for tool X",
//!   by `policy`;
//! - `modify` without a call: reject (the step's `modify` stays the last trail entry);
//! - `modify` to another function: the sample fails ([`ChainError::ModifiedFunction`]).
//!
//! And Airlock's own:
//! - matching the call against the steps' globs that runs past [`glob::MATCH_BUDGET`] fails
//!   closed (reject, or terminate for a review), by `policy`;
//! - a step's `model_explanation` replaces the explanation of the chain's decision when that
//!   step's answer rejects or terminates (what the model is shown), its trail entry keeping
//!   the step's own;
//! - a decision is `timed_out` when its deciding answer is (nobody answered), and so is
//!   Inspect's default after every match escalated when one of them escalated on a timeout.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::call::{Answer, Call, Decision, Kind};
use crate::control::Control;
use crate::document::{Document, PolicyError};
use crate::glob::{self, Budget, Exhausted, ToolMatcher};
use crate::render::format_function_call;
use crate::steps::{self, ExternalStep, ParamError, Step, Subject};

/// The approver name Inspect records for its own synthetic answers.
pub const POLICY: &str = "policy";

/// Inspect's explanation for a `modify` that supplied no call.
pub const MODIFY_WITHOUT_CALL: &str =
    "The approver chose to modify this tool call but supplied no modified call, so the call was not run.";

/// A policy compiled for one kind: its steps and one matcher for all their globs.
#[derive(Debug, Clone)]
pub struct Policy {
    kind: Kind,
    steps: Vec<PolicyStep>,
    matcher: ToolMatcher,
    digest: String,
    warnings: Vec<String>,
    control: Control,
}

/// One step of a compiled policy.
#[derive(Debug, Clone)]
pub struct PolicyStep {
    /// The name as written (`auto`, `human`, `evaltools/scanner`, …).
    pub name: Arc<str>,
    /// The `tools` specs as written.
    pub tools: Vec<String>,
    /// The globs Inspect derives from them.
    pub globs: Vec<String>,
    /// The step's parameters, for the step to read: every key but `model_explanation`.
    pub params: crate::steps::Params,
    /// What the model is shown when this step's answer rejects or terminates, instead of the
    /// step's explanation (`model_explanation`).
    pub model_explanation: Option<Arc<str>>,
    /// The step itself.
    pub step: Step,
}

/// What a chain looks at besides the policy.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The call (as executed, for a review).
    pub call: &'a Call,
    /// The assistant message's text.
    pub message: &'a str,
    /// For a review, the tool's raw output.
    pub output: Option<&'a str>,
    /// What the runner knows about the tool (an MCP server's tool annotations), if anything.
    pub metadata: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// Where a chain stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChainState {
    /// The first step not yet considered.
    pub next_step: usize,
    /// Every answer so far, in order.
    pub trail: Vec<TrailEntry>,
}

/// One recorded answer (one Inspect `ApprovalEvent` / `ReviewEvent`).
#[derive(Debug, Clone, PartialEq)]
pub struct TrailEntry {
    /// The step's index; `None` for the `policy` entry.
    pub step: Option<usize>,
    /// The step's name, or `policy`.
    pub approver: Arc<str>,
    /// What it answered.
    pub answer: Answer,
}

/// The result of running a chain as far as it can go, borrowing the policy's step it waits
/// for.
// `Decided` is by far the common case: boxing it would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Verdict<'p> {
    /// The chain decided.
    Decided(Outcome),
    /// The chain waits for an external step.
    Pending {
        /// The step it waits for.
        step: PendingStep<'p>,
        /// The state to send with the step's task.
        state: ChainState,
    },
    /// A step's answer makes the sample fail, as it would in Inspect.
    Failed(ChainError),
}

/// An external step of a policy: the one a chain waits for, or the one whose answer resumes
/// it. Only the policy hands one out, so it is always a step of that policy, and external.
#[derive(Debug, Clone, Copy)]
pub struct PendingStep<'p> {
    index: usize,
    step: &'p PolicyStep,
    external: &'p ExternalStep,
}

/// A decided chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The decision the runner applies.
    pub decision: Decision,
    /// For `modify`: the call to run.
    pub modified: Option<Call>,
    /// Why.
    pub explanation: Option<Cow<'static, str>>,
    /// The deciding answer's metadata.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// The deciding step's name, `policy`, or `None` when no step matched a review.
    pub approver: Option<Arc<str>>,
    /// The deciding step's index; `None` for `policy` and for an unmatched review.
    pub step: Option<usize>,
    /// The decision came from a deadline, not from an answer.
    pub timed_out: bool,
    /// Every answer, in order.
    pub trail: Vec<TrailEntry>,
}

/// An answer Inspect would fail the sample on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChainError {
    /// A `modify` named another function.
    #[error(
        "An approver returned a modified call to '{modified}' for a call to '{called}'. A 'modify' decision may change only the arguments of a tool call, not the function called."
    )]
    ModifiedFunction {
        /// The function asked about.
        called: String,
        /// The function the step returned.
        modified: String,
    },
}

// === impl Policy ===

impl Policy {
    /// Parses and compiles the section of `text` for `kind`.
    pub fn parse(source_name: &str, text: &str, kind: Kind) -> Result<Policy, PolicyError> {
        Policy::compile(&Document::parse(source_name, text)?, kind)
    }

    /// Compiles the section of a document for `kind`: every step built, every glob checked.
    pub fn compile(document: &Document, kind: Kind) -> Result<Policy, PolicyError> {
        let mut steps = Vec::new();
        let mut warnings: Vec<String> = document
            .ignored_keys
            .iter()
            .map(|(key, l)| {
                format!("{}:{}:{}: top-level key '{key}' is ignored", document.source_name, l.line, l.column)
            })
            .collect();
        for entry in document.entries(kind)? {
            let located = |ParamError { key, message }| {
                let location = key
                    .and_then(|key| entry.param_locations.iter().find(|(k, _)| *k == key).map(|(_, l)| *l))
                    .unwrap_or(entry.location);
                document.error(location, format!("step '{}': {message}", entry.name))
            };
            let mut params = entry.params.clone();
            let model_explanation = steps::take_model_explanation(&mut params).map_err(located)?;
            let step = Step::from_params(&entry.name, kind, &params).map_err(located)?;
            let mut globs = Vec::new();
            for (spec, location) in entry.tools.iter().zip(&entry.tools_locations) {
                for g in glob::expand_tools([spec.as_str()]) {
                    if !glob::check(&g).map_err(|e| document.error(*location, e.to_string()))? {
                        warnings.push(format!(
                            "{}:{}:{}: glob '{g}' can never match (it has an empty character range)",
                            document.source_name, location.line, location.column
                        ));
                    }
                    globs.push(g);
                }
            }
            if globs.is_empty() {
                warnings.push(format!(
                    "{}:{}:{}: step '{}' has no tool globs and never runs",
                    document.source_name, entry.location.line, entry.location.column, entry.name
                ));
            }
            if let Step::External(ExternalStep::Human(human)) = &step
                && human.choices.contains(&Decision::Modify)
            {
                warnings.push(format!(
                    "{}:{}:{}: 'modify' lets a person edit the call's arguments, an Airlock extension: \
                     Inspect drops it from a human's choices, so under Inspect this step never offers it",
                    document.source_name, entry.location.line, entry.location.column
                ));
            }
            steps.push(PolicyStep {
                name: entry.name.as_str().into(),
                tools: entry.tools.clone(),
                globs,
                params,
                model_explanation,
                step,
            });
        }
        let all_globs: Vec<Vec<String>> = steps.iter().map(|s| s.globs.clone()).collect();
        let matcher = ToolMatcher::new(&all_globs).map_err(|e| document.error(Default::default(), e.to_string()))?;
        let control = Control::from_document(document, steps.iter().map(|s| &s.step))?;
        Ok(Policy { kind, steps, matcher, digest: document.digest.clone(), warnings, control })
    }

    /// Approval or review.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[PolicyStep] {
        &self.steps
    }

    /// sha256 of the document's text, hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// What the fleet does beyond one call: the breaker and the incident rule.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// Things that are legal but probably not meant (ignored keys, dropped choices).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Runs the chain from `state` as far as built-in steps take it.
    pub fn evaluate(&self, input: &Input<'_>, state: ChainState) -> Verdict<'_> {
        self.evaluate_rendered(input, &format_function_call(input.call), state)
    }

    /// [`Policy::evaluate`] for a caller that rendered the call already, with
    /// [`format_function_call`], to show it.
    pub fn evaluate_rendered(&self, input: &Input<'_>, rendered: &str, state: ChainState) -> Verdict<'_> {
        self.run(&self.subject(input, rendered), state)
    }

    /// Continues the chain with the answer of `step`, an external step of this policy (as
    /// [`Verdict::Pending`] or [`Policy::external_step`] hands it out).
    pub fn resume(
        &self,
        input: &Input<'_>,
        mut state: ChainState,
        step: PendingStep<'_>,
        answer: Answer,
    ) -> Verdict<'_> {
        let rendered = format_function_call(input.call);
        let subject = self.subject(input, &rendered);
        let answer = self.admit(step, answer);
        state.next_step = step.index + 1;
        if let Some(verdict) = self.record(&subject, step.index, answer, &mut state) {
            return verdict;
        }
        self.run(&subject, state)
    }

    /// The external step at `index`, whose answer [`Policy::resume`] takes; `None` for a
    /// built-in step or an index past the last step.
    pub fn external_step(&self, index: usize) -> Option<PendingStep<'_>> {
        let step = self.steps.get(index)?;
        match &step.step {
            Step::External(external) => Some(PendingStep { index, step, external }),
            Step::BuiltIn(_) => None,
        }
    }

    /// The indices of the steps whose globs match the rendered call, in order, within one
    /// evaluation's [`glob::MATCH_BUDGET`].
    pub fn matching(&self, rendered: &str) -> Result<Vec<usize>, Exhausted> {
        self.matcher.matching_steps(rendered, &mut Budget::evaluation())
    }

    fn subject<'a>(&self, input: &Input<'a>, rendered: &'a str) -> Subject<'a> {
        Subject {
            call: input.call,
            rendered,
            kind: self.kind,
            message: input.message,
            output: input.output,
            metadata: input.metadata,
        }
    }

    /// Asks the matching steps from `state.next_step` on, in order, as Inspect's generator
    /// of matching approvers does: steps after the deciding one are never matched.
    ///
    /// Matching that runs past its budget decides as an unanswered step does: fail closed,
    /// recorded as `policy`.
    fn run(&self, subject: &Subject<'_>, mut state: ChainState) -> Verdict<'_> {
        // Every trail entry so far came from a step that matched.
        let mut any_matched = !state.trail.is_empty();
        let mut budget = Budget::evaluation();
        for index in state.next_step..self.steps.len() {
            match self.matcher.step_matches(index, subject.rendered, &mut budget) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(exhausted) => {
                    state.next_step = self.steps.len();
                    let explanation = format!("{exhausted}, so the call is not judged.");
                    return Self::policy_decides(Answer::new(self.kind.fail_closed(), explanation), state);
                }
            }
            any_matched = true;
            let step = &self.steps[index];
            let answer = match &step.step {
                Step::BuiltIn(built_in) => built_in.decide(subject),
                Step::External(external) => {
                    state.next_step = index;
                    return Verdict::Pending { step: PendingStep { index, step, external }, state };
                }
            };
            state.next_step = index + 1;
            if let Some(verdict) = self.record(subject, index, answer, &mut state) {
                return verdict;
            }
        }
        state.next_step = self.steps.len();
        self.exhausted(subject, any_matched, state)
    }

    /// Records a step's answer; the verdict when it decides, `None` when it escalates.
    fn record(
        &self,
        subject: &Subject<'_>,
        step: usize,
        answer: Answer,
        state: &mut ChainState,
    ) -> Option<Verdict<'_>> {
        let decisive = answer.decision != Decision::Escalate;
        state.trail.push(TrailEntry { step: Some(step), approver: self.steps[step].name.clone(), answer });
        decisive.then(|| {
            let answer = state.trail.last().expect("just pushed").answer.clone();
            self.finish(subject, Some(step), answer, std::mem::take(state))
        })
    }

    /// Inspect's answer when no step decided.
    fn exhausted(&self, subject: &Subject<'_>, any_matched: bool, state: ChainState) -> Verdict<'_> {
        let function = &subject.call.function;
        let explanation = match (self.kind, any_matched) {
            (Kind::Approval, false) => format!("No approvers registered for tool {function}"),
            (Kind::Approval, true) => format!("No approval granted for tool {function}"),
            (Kind::Review, true) => format!("No reviewer took the escalation for tool {function}"),
            (Kind::Review, false) => {
                return Verdict::Decided(Outcome {
                    decision: Decision::Continue,
                    modified: None,
                    explanation: None,
                    metadata: None,
                    approver: None,
                    step: None,
                    timed_out: false,
                    trail: state.trail,
                });
            }
        };
        let decision = match self.kind {
            Kind::Approval => Decision::Reject,
            Kind::Review => Decision::Continue,
        };
        // Every match escalated: when one did because nobody answered it in time, no answer
        // is why the chain ends here.
        let timed_out = state.trail.iter().any(|entry| entry.answer.timed_out);
        Self::policy_decides(Answer { timed_out, ..Answer::new(decision, explanation) }, state)
    }

    /// The chain decided by `policy`, its answer the last of the trail.
    fn policy_decides(answer: Answer, mut state: ChainState) -> Verdict<'static> {
        let policy: Arc<str> = POLICY.into();
        state.trail.push(TrailEntry { step: None, approver: policy.clone(), answer: answer.clone() });
        Verdict::Decided(Outcome::from_answer(answer, Some(policy), None, state.trail))
    }

    /// Applies Inspect's rules for `modify` to a deciding answer.
    fn finish(&self, subject: &Subject<'_>, step: Option<usize>, answer: Answer, state: ChainState) -> Verdict<'_> {
        if answer.decision == Decision::Modify {
            match &answer.modified {
                None => {
                    let reject = Answer {
                        decision: Decision::Reject,
                        explanation: Some(MODIFY_WITHOUT_CALL.into()),
                        modified: None,
                        ..answer
                    };
                    return Verdict::Decided(self.decided(reject, step, state.trail));
                }
                Some(modified) if modified.function != subject.call.function => {
                    return Verdict::Failed(ChainError::ModifiedFunction {
                        called: subject.call.function.clone(),
                        modified: modified.function.clone(),
                    });
                }
                Some(_) => {}
            }
        }
        Verdict::Decided(self.decided(answer, step, state.trail))
    }

    /// The outcome of the deciding `answer` of `step`: a reject or terminate shows the model
    /// the step's `model_explanation`, when it has one, instead of the answer's explanation.
    fn decided(&self, answer: Answer, step: Option<usize>, trail: Vec<TrailEntry>) -> Outcome {
        let approver = Some(step.map_or_else(|| POLICY.into(), |i| self.steps[i].name.clone()));
        let mut outcome = Outcome::from_answer(answer, approver, step, trail);
        if outcome.decision.denies()
            && let Some(shown) = step.and_then(|i| self.steps[i].model_explanation.as_deref())
        {
            outcome.explanation = Some(Cow::Owned(shown.to_owned()));
        }
        outcome
    }

    /// An external answer as the chain accepts it: a human's answer outside the offered
    /// choices is `terminate`, as Inspect's human approver fails closed; any other step's
    /// answer that its kind does not allow fails closed for the kind.
    fn admit(&self, step: PendingStep<'_>, answer: Answer) -> Answer {
        let (allowed, fallback): (&[Decision], Decision) = match step.external {
            ExternalStep::Human(human) => (&human.choices, Decision::Terminate),
            ExternalStep::Named(_) => (self.kind.decisions(), self.kind.fail_closed()),
        };
        if allowed.contains(&answer.decision) {
            return answer;
        }
        let explanation = format!(
            "'{}' answered '{}', which was not among its choices ({}).",
            step.name(),
            answer.decision,
            crate::steps::list(allowed)
        );
        Answer {
            decision: fallback,
            modified: None,
            explanation: Some(explanation.into()),
            metadata: answer.metadata,
            timed_out: answer.timed_out,
        }
    }
}

impl fmt::Display for Policy {
    /// The normalized chain, one step per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} chain ({} steps, digest {})", self.kind, self.steps.len(), &self.digest[..12])?;
        for (index, step) in self.steps.iter().enumerate() {
            write!(f, "  {index}. {}  tools: {}", step.step, step.globs.join(" | "))?;
            if let Some(shown) = &step.model_explanation {
                write!(f, "  model_explanation: {shown:?}")?;
            }
            writeln!(f)?;
        }
        write!(f, "{}", self.control)
    }
}

// === impl PendingStep ===

impl<'p> PendingStep<'p> {
    /// The step's index in its policy, which its task and its answer carry on the wire.
    pub fn index(self) -> usize {
        self.index
    }

    /// The step as compiled: its name, globs and parameters.
    pub fn policy_step(self) -> &'p PolicyStep {
        self.step
    }

    /// The step's name as written.
    pub fn name(self) -> &'p Arc<str> {
        &self.step.name
    }

    /// What the step is, and so where it runs.
    pub fn external(self) -> &'p ExternalStep {
        self.external
    }
}

// === impl Outcome ===

impl Outcome {
    fn from_answer(answer: Answer, approver: Option<Arc<str>>, step: Option<usize>, trail: Vec<TrailEntry>) -> Self {
        Outcome {
            decision: answer.decision,
            modified: answer.modified,
            explanation: answer.explanation,
            metadata: answer.metadata,
            approver,
            step,
            timed_out: answer.timed_out,
            trail,
        }
    }
}

#[cfg(test)]
mod tests;
