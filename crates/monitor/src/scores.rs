//! A budgeted step's scores shared by every monitor process that serves the step, through the
//! log `<p>.scores.<step>`: each process appends the scores it gives and folds in the others',
//! so that all of them pace one budget, and one that starts (or restarts) mid-run reads the
//! run's scores so far before it decides.

use std::sync::Arc;

use airlock_contract::v1::{self, control_event::Event};
use airlock_control::{ControlError, ControlLog, Fold};
use airlock_transport::{Topology, Transport};
use tokio::sync::mpsc;
use tracing::warn;

use crate::budget::{Budgets, Entry};

/// Folds the scores other processes of the step gave into this process's budgets.
#[derive(Debug, Clone)]
struct Others {
    budgets: Arc<Budgets>,
    /// This process's id: its own scores were counted when it decided.
    own: Arc<str>,
}

impl Fold for Others {
    fn fold(&self, entry: &v1::ControlEvent) {
        if let Some(Event::Score(score)) = &entry.event
            && *entry.by != *self.own
        {
            self.budgets.record(&Entry {
                step: score.step.clone(),
                scope: score.scope.clone(),
                audit_budget: score.audit_budget,
                score: score.score,
                passed: score.passed,
            });
        }
    }
}

/// Budgets for `step` shared through its log in `topology`'s fleet, as process `id`: the log
/// read to its end before this returns, then followed; every score the budgets take is
/// appended for the others.
pub async fn shared<T: Transport>(
    transport: T,
    topology: &Topology,
    step: &str,
    id: &str,
    budgets: Budgets,
) -> Result<Arc<Budgets>, ControlError> {
    let (outbox, mut scores) = mpsc::unbounded_channel();
    let budgets = Arc::new(budgets.with_outbox(outbox));
    let others = Others { budgets: budgets.clone(), own: id.into() };
    let log = ControlLog::follow(transport, topology.scores_log(step), id, others, None).await?;
    tokio::spawn(async move {
        while let Some(entry) = scores.recv().await {
            let Entry { step, scope, audit_budget, score, passed } = entry;
            let appended = log.append(Event::Score(v1::StepScore { step, scope, score, audit_budget, passed })).await;
            if let Err(error) = appended {
                // The others pace on without this score: none of them passes more than its share.
                warn!(%error, "A score was not shared with the step's other monitor processes.");
            }
        }
    });
    Ok(budgets)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use airlock_transport::MemoryTransport;

    use super::*;
    use crate::budget::Mode;

    async fn process(transport: &MemoryTransport, topology: &Topology, id: &str) -> Arc<Budgets> {
        shared(transport.clone(), topology, "monitor", id, Budgets::new(Default::default())).await.unwrap()
    }

    #[tokio::test]
    async fn every_process_of_a_step_paces_on_the_scores_all_of_them_gave() {
        let transport = MemoryTransport::new();
        let topology = Topology::empty("t").with_scores_log("monitor");
        transport.declare(&topology).await.unwrap();
        let a = process(&transport, &topology, "monitor-a").await;
        let b = process(&transport, &topology, "monitor-b").await;
        let passed = (0..100).filter(|i| a.decide("monitor", "run", 0.05, Mode::Paced, f64::from(*i) / 10.0).0).count();
        // The other process hears of every score, and of what was passed on.
        b.decide("monitor", "run", 0.05, Mode::Paced, 0.0);
        let heard = async {
            loop {
                match b.state("monitor", "run") {
                    Some(state) if state.seen == 101 => break state,
                    _ => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        };
        let state = tokio::time::timeout(Duration::from_secs(10), heard).await.expect("b heard of a's scores");
        assert_eq!(state.passed, passed as u64);
        // A process that starts later (or again) reads the run's scores before it decides.
        let late = process(&transport, &topology, "monitor-c").await;
        let (_, state) = late.decide("monitor", "run", 0.05, Mode::Paced, 0.0);
        assert!(state.seen >= 102, "{state:?}");
        assert_eq!(late.state("monitor", "another-run"), None, "budgets are per run");
    }
}
