//! Approvals of tasks whose step needs several reviewers: one per reviewer, in order, and the
//! one that completes the count decides the task in its own transaction.

use airlock_records::review::ApprovalView;

use super::{ADD_WEBHOOK, Db, Delivery, OutboxEntry, Recording, Store, StoreError};
use crate::task::{State, Task, agreeing, same_reviewer};

/// What an approval did.
#[derive(Debug, Clone, PartialEq)]
pub enum Approved {
    /// Recorded; more approvals are needed. Carries the task with its approvals.
    Counted(Box<Task>),
    /// Recorded, and it completed the count: the task is decided and its answer is in the
    /// outbox, leased to the caller (none for a canary, whose answer goes nowhere).
    Decided(Option<OutboxEntry>),
    /// This reviewer approved the task before: nothing changed. Carries the task.
    Again(Box<Task>),
    /// The task was not pending: nothing changed. Carries the task as it stands.
    NotPending(Box<Task>),
    /// No such task.
    NotFound,
}

impl Store {
    /// Records `approval` of `task` unless its reviewer (whatever the case of the name)
    /// approved it before, and when the approvals of the same call (the one asked, or the same
    /// modified call) make [`Task::approvals_needed`] decides the task with what `finish`
    /// builds from the task and all its approvals, in the same transaction. The transaction
    /// first locks the task's row (a write that changes nothing), so approvals of one task,
    /// from any process sharing the store, are counted one after the other.
    pub async fn approve(
        &self,
        task: &Task,
        approval: &ApprovalView,
        finish: impl FnOnce(&Task) -> Recording,
    ) -> Result<Approved, StoreError> {
        const LOCK: &str = "UPDATE tasks SET state = state WHERE id = $1 AND state = 'pending'";
        const GIVEN: &str = "SELECT reviewer, approved_at, explanation, modified_arguments FROM approvals \
                             WHERE task_id = $1 ORDER BY ordinal";
        const ADD: &str = "INSERT INTO approvals (task_id, reviewer, ordinal, approved_at, explanation, \
                           modified_arguments) VALUES ($1, $2, $3, $4, $5, $6)";
        let outcome = on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            let locked = sqlx::query(LOCK).bind(&task.id).execute(&mut *tx).await?.rows_affected();
            if locked == 0 {
                tx.rollback().await?;
                None
            } else {
                let given: Vec<Given> = sqlx::query_as(GIVEN).bind(&task.id).fetch_all(&mut *tx).await?;
                let mut approvals: Vec<ApprovalView> = given.into_iter().map(approval_view).collect();
                // What the locked row holds: a pending task's other columns never change.
                let stored = Task { state: State::Pending, approvals: approvals.clone(), ..task.clone() };
                if approvals.iter().any(|a| same_reviewer(&a.reviewer, &approval.reviewer)) {
                    tx.rollback().await?;
                    Some(Approved::Again(Box::new(stored)))
                } else {
                    sqlx::query(ADD)
                        .bind(&task.id)
                        .bind(&approval.reviewer)
                        .bind(approvals.len() as i64 + 1)
                        .bind(approval.at_unix_ms)
                        .bind(&approval.explanation)
                        .bind(&approval.modified_arguments)
                        .execute(&mut *tx)
                        .await?;
                    approvals.push(approval.clone());
                    let approved = Task { approvals, ..stored };
                    if agreeing(&approved.approvals, approval).len() < approved.approvals_needed() as usize {
                        tx.commit().await?;
                        Some(Approved::Counted(Box::new(approved)))
                    } else {
                        let recording = finish(&approved);
                        if record_decision!(tx, approved, &recording) {
                            tx.commit().await?;
                            Some(Approved::Decided(recording.entry(&approved)))
                        } else {
                            tx.rollback().await?;
                            None
                        }
                    }
                }
            }
        });
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
        Ok(match self.task(&task.id).await? {
            Some(task) => Approved::NotPending(Box::new(task)),
            None => Approved::NotFound,
        })
    }

    /// Fills in the approvals of those `tasks` whose step needs several (one query for all).
    pub(super) async fn load_approvals(&self, tasks: &mut [Task]) -> Result<(), StoreError> {
        let ids: Vec<String> = tasks.iter().filter(|t| t.approvals_needed() > 1).map(|t| t.id.clone()).collect();
        for (task_id, approval) in self.approvals_of(&ids).await? {
            if let Some(task) = tasks.iter_mut().find(|t| t.id == task_id) {
                task.approvals.push(approval);
            }
        }
        Ok(())
    }

    /// The approvals of the tasks `ids`, each with its task's id, in order (one query for all).
    pub(super) async fn approvals_of(&self, ids: &[String]) -> Result<Vec<(String, ApprovalView)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, String, i64, String, Option<String>)> = on_db!(self, pool => {
            let mut query = sqlx::QueryBuilder::new(
                "SELECT task_id, reviewer, approved_at, explanation, modified_arguments FROM approvals \
                 WHERE task_id IN (",
            );
            let mut separated = query.separated(", ");
            for id in ids {
                separated.push_bind(id.clone());
            }
            separated.push_unseparated(") ORDER BY task_id, ordinal");
            query.build_query_as().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(task_id, reviewer, at_unix_ms, explanation, modified_arguments)| {
                (task_id, approval_view((reviewer, at_unix_ms, explanation, modified_arguments)))
            })
            .collect())
    }
}

/// An approval as stored: reviewer, when, explanation, the modified call's arguments.
type Given = (String, i64, String, Option<String>);

/// An approval as read from the store.
fn approval_view((reviewer, at_unix_ms, explanation, modified_arguments): Given) -> ApprovalView {
    ApprovalView { reviewer, at_unix_ms, explanation, modified_arguments }
}
