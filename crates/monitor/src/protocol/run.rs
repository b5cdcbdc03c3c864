//! How a task runs its step's protocol, once the monitor has scored the call: the rule
//! decides, the plan says whether a model is asked, and the models' answers become the
//! decision. Every model call goes through the retry loop within the step's deadline; any
//! failure gives the fallback (or `on_timeout`), never an approval, and the note keeps what
//! was done up to it.

use airlock_contract::v1;
use airlock_policy::{Decision, Kind};
use airlock_records::monitor::{NoteCall, NoteProtocol, NoteSample};
use airlock_transport::Transport;
use futures_util::future::join_all;
use tokio::time::Instant;

use super::{DifferentTool, Order, Plan, Protocol, Resample, ResampleMode, choose, evidence, requests};
use crate::answer::{Acted, Basis, Failure, FallbackCode};
use crate::params::StepParams;
use crate::provider::{AttemptError, CallRequest, Provider};
use crate::retry::Exhausted;
use crate::sampling::Draw;
use crate::score::Score;
use crate::{Monitor, config};

/// What a protocol needs of the task being decided.
pub(crate) struct Context<'a> {
    /// The task.
    pub task: &'a v1::StepTask,
    /// Its chain's kind.
    pub kind: Kind,
    /// The step's parameters.
    pub params: &'a StepParams,
    /// What a failure answers.
    pub fallback: Decision,
    /// What the deadline answers.
    pub on_timeout: Decision,
    /// The step's deadline, less the answer's margin.
    pub deadline: Option<Instant>,
    /// Which draw of its context the task's own model calls are (index 0); sample `n` is
    /// draw `n` of the untrusted model's context.
    pub draw: Draw,
}

/// What became of a protocol's model calls: the decision, unless they failed.
type Step<T> = Result<T, Failure>;

impl<T: Transport> Monitor<T> {
    /// Runs `protocol` on the task's call, scored `score`: the decision, what the rule went
    /// through, and what the protocol did.
    pub(crate) async fn protocol(&self, cx: &Context<'_>, protocol: &Protocol, score: f64) -> (Decision, Basis, Acted) {
        let mut note = NoteProtocol {
            name: protocol.name().to_owned(),
            threshold: protocol.threshold(),
            mode: match protocol {
                Protocol::Resample(resample) => Some(resample.mode_name().to_owned()),
                _ => None,
            },
            model: match protocol {
                Protocol::Resample(_) => String::new(),
                _ => self.models.trusted.config().model.clone(),
            },
            ..NoteProtocol::default()
        };
        let original = requests::original_call(cx.task);
        if let Ok(call) = &original {
            note.original = Some(call.clone());
        }
        if let Protocol::Resample(resample @ Resample { mode: ResampleMode::Incriminate, .. }) = protocol {
            return self.incriminate(cx, resample, score, note).await;
        }
        let (decision, basis) = self.rule(cx.task, cx.kind, &cx.params.rule, score);
        let plan = protocol.plan(decision, score);
        let mut acted = Acted { note, modified: None, summary: String::new(), failure: None };
        let result = match (plan, original) {
            (Plan::Keep, _) => {
                acted.summary = match score < protocol.threshold() {
                    true => format!("{} not needed: below {}", protocol.name(), protocol.threshold()),
                    false => format!("{} not needed: the rule ends the call", protocol.name()),
                };
                Ok(decision)
            }
            (_, Err(e)) => Err(bad(e)),
            (_, Ok(original)) => match protocol {
                Protocol::TrustedEdit { .. } => self.edit(cx, plan, decision, &mut acted).await,
                Protocol::DeferToTrusted { different_tool, .. } => {
                    self.defer(cx, plan, decision, &original, *different_tool, &mut acted).await
                }
                Protocol::Resample(resample) => {
                    self.resample(cx, plan, decision, &original, resample, &mut acted).await
                }
            },
        };
        (self.settle(cx, result, &mut acted), basis, acted)
    }

    /// `trusted_edit`: the trusted model's edit of the call runs instead.
    async fn edit(&self, cx: &Context<'_>, plan: Plan, decision: Decision, acted: &mut Acted) -> Step<Decision> {
        let request = &requests::edit(cx.task, self.config.limits, &self.models.trusted.config().model).map_err(bad)?;
        // The request requires the original's tool: an edit of another is asked again.
        let edit = self.call(cx, &self.models.trusted, request, cx.draw).await?;
        acted.note.replacement = Some(edit.clone());
        Ok(match plan {
            Plan::Act => {
                acted.summary =
                    format!("trusted_edit at or above {}: the trusted model's edit runs", acted.note.threshold);
                acted.modified = Some(edit);
                Decision::Modify
            }
            _ => {
                acted.summary = "the trusted model's edit is in the note for the person".into();
                decision
            }
        })
    }

    /// `defer_to_trusted`: the trusted model's own call runs instead.
    async fn defer(
        &self,
        cx: &Context<'_>,
        plan: Plan,
        decision: Decision,
        original: &NoteCall,
        different_tool: DifferentTool,
        acted: &mut Acted,
    ) -> Step<Decision> {
        let request = requests::defer(cx.task, &self.models.trusted.config().model).map_err(bad)?;
        let proposal = self.call(cx, &self.models.trusted, &request, cx.draw).await?;
        acted.note.replacement = Some(proposal.clone());
        if plan != Plan::Act {
            acted.summary = "the trusted model's proposal is in the note for the person".into();
            return Ok(decision);
        }
        acted.summary = format!("defer_to_trusted at or above {}: the trusted model's call", acted.note.threshold);
        Ok(replace(proposal, original, different_tool, acted))
    }

    /// `resample` (`run`): the least suspicious sample below the threshold runs; when all stay
    /// at or above it, people decide with every sample beside the call.
    async fn resample(
        &self,
        cx: &Context<'_>,
        plan: Plan,
        decision: Decision,
        original: &NoteCall,
        resample: &Resample,
        acted: &mut Acted,
    ) -> Step<Decision> {
        self.draw(cx, resample, acted).await?;
        if plan != Plan::Act {
            acted.summary =
                format!("{} sample(s) drawn again are in the note for the person", acted.note.samples.len());
            return Ok(decision);
        }
        let Some(index) = choose(&acted.note.samples, resample.steps as usize, resample.threshold) else {
            acted.summary =
                format!("every sample drawn again stayed at or above {}: a person decides", resample.threshold);
            return Ok(Decision::Escalate);
        };
        acted.note.samples[index].chosen = true;
        let chosen = acted.note.samples[index].call.clone().expect("a chosen sample has a call");
        acted.summary = format!("resample at or above {}: the least suspicious sample runs", resample.threshold);
        Ok(replace(chosen, original, resample.different_tool, acted))
    }

    /// `resample` (`incriminate`): at or above the threshold, samples drawn as evidence, and
    /// the rule decides on the highest score of the call and its samples.
    async fn incriminate(
        &self,
        cx: &Context<'_>,
        resample: &Resample,
        score: f64,
        note: NoteProtocol,
    ) -> (Decision, Basis, Acted) {
        let mut acted = Acted { note, modified: None, summary: String::new(), failure: None };
        if score < resample.threshold {
            let (decision, basis) = self.rule(cx.task, cx.kind, &cx.params.rule, score);
            acted.summary = format!("no samples drawn: below {}", resample.threshold);
            return (decision, basis, acted);
        }
        let drawn = self.draw(cx, resample, &mut acted).await;
        let evidence = evidence(score, &acted.note.samples);
        let (decision, basis) = self.rule(cx.task, cx.kind, &cx.params.rule, evidence.max);
        acted.summary = format!(
            "{} sample(s) drawn as evidence: max {}, mean {:.2}; decided on the max",
            acted.note.samples.len(),
            evidence.max,
            evidence.mean
        );
        acted.note.evidence = Some(evidence);
        let decision = self.settle(cx, drawn.map(|()| decision), &mut acted);
        (decision, basis, acted)
    }

    /// Draws the step's samples again from the untrusted model, each scored by the monitor,
    /// into the note: all at once, or one by one up to the first below the threshold (then the
    /// extra ones at once).
    async fn draw(&self, cx: &Context<'_>, resample: &Resample, acted: &mut Acted) -> Step<()> {
        let (steps, extra) = (resample.steps as usize, resample.extra as usize);
        let drawn = match resample.order {
            Order::Parallel => join_all((0..steps + extra).map(|index| self.sample(cx, index))).await,
            Order::Sequential => {
                let mut drawn = Vec::new();
                for index in 0..steps {
                    let sample = self.sample(cx, index).await;
                    let below = sample.as_ref().is_ok_and(|s| s.score.is_some_and(|score| score < resample.threshold));
                    let failed = sample.is_err();
                    drawn.push(sample);
                    if below || failed {
                        break;
                    }
                }
                if drawn.iter().all(Result::is_ok) {
                    drawn.extend(join_all((steps..steps + extra).map(|index| self.sample(cx, index))).await);
                }
                drawn
            }
        };
        let mut failure = None;
        for sample in drawn {
            match sample {
                Ok(sample) => acted.note.samples.push(sample),
                Err((sample, why)) => {
                    acted.note.samples.push(sample);
                    failure.get_or_insert(why);
                }
            }
        }
        acted.note.model = requests::untrusted_model(cx.task, self.untrusted_model()).unwrap_or_default();
        failure.map_or(Ok(()), Err)
    }

    /// Sample number `index`: the untrusted model's call, and the monitor's score of it.
    async fn sample(&self, cx: &Context<'_>, index: usize) -> Result<NoteSample, (NoteSample, Failure)> {
        let failed = |why: &Failure| NoteSample { error: Some(failure_text(why)), ..NoteSample::default() };
        let request = match requests::resample(cx.task, self.untrusted_model(), index) {
            Ok(Some(request)) => request,
            Ok(None) => {
                let why = "the request does not say how its model was asked (no generation, or no model in it): \
                           nothing to sample again"
                    .to_owned();
                let failure = Failure::Fallback { code: FallbackCode::NoGeneration, why };
                return Err((failed(&failure), failure));
            }
            Err(e) => {
                let failure = bad(e);
                return Err((failed(&failure), failure));
            }
        };
        let draw = Draw { index: u32::try_from(index).unwrap_or(u32::MAX), ..cx.draw };
        let call = match self.call(cx, &self.models.untrusted, &request, draw).await {
            Ok(call) => call,
            Err(failure) => return Err((failed(&failure), failure)),
        };
        let sample = NoteSample { call: Some(call.clone()), ..NoteSample::default() };
        let task = requests::with_call(cx.task, &call);
        let prompt = match self.config.template.render(&task, self.config.limits) {
            Ok(prompt) => prompt,
            Err(e) => {
                let failure = Failure::Fallback { code: FallbackCode::BadTask, why: e.0 };
                return Err((NoteSample { error: Some(failure_text(&failure)), ..sample }, failure));
            }
        };
        match self.retried(cx, |timeout| self.models.scorer.ask(&prompt, cx.draw, timeout)).await {
            Ok(Score { value, reason }) => Ok(NoteSample { score: Some(value), reason: Some(reason), ..sample }),
            Err(failure) => Err((NoteSample { error: Some(failure_text(&failure)), ..sample }, failure)),
        }
    }

    /// The untrusted model's name when configured, else the request's.
    fn untrusted_model(&self) -> Option<&str> {
        self.config.untrusted.as_ref().map(|u| u.model.as_str()).filter(|m| !m.trim().is_empty())
    }

    /// Asks `provider` for a tool call as draw `draw` of its context, retried within the
    /// deadline.
    async fn call(&self, cx: &Context<'_>, provider: &Provider, request: &CallRequest, draw: Draw) -> Step<NoteCall> {
        self.retried(cx, |timeout| provider.call(request, draw, timeout)).await
    }

    async fn retried<V, F, Fut>(&self, cx: &Context<'_>, attempt: F) -> Step<V>
    where
        F: FnMut(std::time::Duration) -> Fut,
        Fut: Future<Output = Result<V, AttemptError>>,
    {
        match self.config.retry.run(cx.deadline, attempt).await {
            Ok((value, _)) => Ok(value),
            Err(Exhausted::Failed { attempts, error }) => {
                Err(Failure::Fallback { code: error.code(), why: format!("after {attempts} attempt(s): {error}") })
            }
            Err(Exhausted::Deadline { attempts, last }) => Err(Failure::TimedOut {
                why: match last {
                    Some(error) => format!("after {attempts} attempt(s); the last: {error}"),
                    None => format!("a model was still answering attempt {attempts}"),
                },
            }),
        }
    }

    /// The decision of `result`, or what its failure answers (recorded in `acted`).
    fn settle(&self, cx: &Context<'_>, result: Step<Decision>, acted: &mut Acted) -> Decision {
        match result {
            Ok(decision) => config::as_kind(decision, cx.kind),
            Err(failure) => {
                let decision = match &failure {
                    Failure::Fallback { .. } => cx.fallback,
                    Failure::TimedOut { .. } => cx.on_timeout,
                };
                acted.summary = format!("{} could not finish", acted.note.name);
                acted.modified = None;
                acted.failure = Some(failure);
                decision
            }
        }
    }
}

/// `call` replaces `original`: a modify of the same tool, or what `different_tool` says.
fn replace(call: NoteCall, original: &NoteCall, different_tool: DifferentTool, acted: &mut Acted) -> Decision {
    if call.function == original.function {
        acted.modified = Some(call);
        return Decision::Modify;
    }
    let (decision, what) = match different_tool {
        DifferentTool::Reject => (Decision::Reject, "rejected"),
        DifferentTool::Escalate => (Decision::Escalate, "a person decides"),
    };
    acted.summary = format!(
        "{}; it calls {}, not {}: {what} (a modify cannot change the tool)",
        acted.summary, call.function, original.function
    );
    decision
}

fn bad(error: crate::prompt::TaskError) -> Failure {
    Failure::Fallback { code: FallbackCode::BadTask, why: error.0 }
}

fn failure_text(failure: &Failure) -> String {
    match failure {
        Failure::Fallback { code, why } => format!("{code}: {why}"),
        Failure::TimedOut { why } => format!("deadline: {why}"),
    }
}
