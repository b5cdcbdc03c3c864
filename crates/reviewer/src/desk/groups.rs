//! Grouped calls at the desk ([`crate::groups`]): the groups a reviewer may decide, and one
//! confirmed decision answering every task of a group, each decided as the reviewer's own
//! decision of that task ([`Desk::decide`]: its choices, claims and conflicts checked, its
//! answer signed, recorded and sent on its own).

use airlock_policy::Decision;

use super::{Answer, Desk, Refusal, ruling};
use crate::auth::Reviewer;
use crate::store::GroupCount;
use crate::task::Task;

/// The most tasks one group decision answers; a larger group is answered in turns.
pub const MAX_GROUP: u32 = 1000;

/// A group of identical pending calls as a reviewer sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Its identity and count.
    pub count: GroupCount,
    /// Its oldest pending task: what every task of it asks.
    pub first: Task,
}

/// What a group decision did.
#[derive(Debug)]
pub struct GroupDecided {
    /// The tasks decided, as decided.
    pub decided: Vec<Task>,
    /// The tasks left as they were, with why (decided meanwhile, claimed by another, …).
    pub refused: Vec<(String, Refusal)>,
}

impl Desk {
    /// Up to `limit` groups of two or more identical pending calls in `reviewer`'s pools, the
    /// largest first, each with its oldest task.
    pub async fn groups(&self, reviewer: &Reviewer, limit: u32) -> Result<Vec<Group>, Refusal> {
        let pools = reviewer.pools_among(&self.pools);
        let mut groups = Vec::new();
        for count in self.store.groups(&pools, limit).await? {
            // A group emptied since it was counted is left out.
            if let Some(first) = self.store.group_tasks(&pools, &count.group, 1).await?.pop() {
                groups.push(Group { count, first });
            }
        }
        Ok(groups)
    }

    /// The group `group` in `reviewer`'s pools as it stands now, if any task of it is pending.
    pub async fn group(&self, reviewer: &Reviewer, group: &str) -> Result<Option<Group>, Refusal> {
        let tasks = self.store.group_tasks(&reviewer.pools_among(&self.pools), group, MAX_GROUP).await?;
        let count = tasks.len() as u64;
        Ok(tasks.into_iter().next().map(|first| Group {
            count: GroupCount { group: group.to_owned(), count, oldest: first.received_at },
            first,
        }))
    }

    /// Answers every pending task of `group` in `reviewer`'s pools with `answer`, once the
    /// reviewer confirmed `count`, the number of tasks they were shown: a group that grew or
    /// shrank since is refused ([`Refusal::GroupChanged`], with its count now), and nothing is
    /// decided. The answer is one of the group's choices (never `modify`, whose arguments are
    /// a look at one call), checked before any task is decided; then each task is decided on
    /// its own, and one that cannot be (decided meanwhile, say) is listed with why.
    pub async fn decide_group(
        &self,
        reviewer: &Reviewer,
        group: &str,
        answer: Answer,
        count: u64,
    ) -> Result<GroupDecided, Refusal> {
        let pools = reviewer.pools_among(&self.pools);
        let tasks = self.store.group_tasks(&pools, group, MAX_GROUP).await?;
        let Some(first) = tasks.first() else { return Err(Refusal::NotFound) };
        if answer.arguments.is_some()
            || ruling(first, &answer.decision, answer.explanation.clone())?.0 == Decision::Modify
        {
            return Err(Refusal::GroupModify);
        }
        if tasks.len() as u64 != count {
            return Err(Refusal::GroupChanged { count: tasks.len() });
        }
        let mut done = GroupDecided { decided: Vec::with_capacity(tasks.len()), refused: Vec::new() };
        for task in tasks {
            match self.decide(reviewer, &task.id, answer.clone()).await {
                Ok(decided) => done.decided.push(decided),
                Err(refusal) => done.refused.push((task.id, refusal)),
            }
        }
        Ok(done)
    }
}
