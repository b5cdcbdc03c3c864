//! Grouped calls: pending tasks whose call is identical, across samples and runs, shown as one
//! group with its count and answered by one confirmed decision, each task then decided,
//! signed and recorded on its own ([`crate::desk::groups`]).
//!
//! Identical is what a standing decision covers ([`crate::standing`]): the same call text as a
//! Python call expression, the same pool, kind and step, the same caller (broker user and
//! tenant) and the same policy (name and digest). A task whose step needs several approvals
//! is never grouped: each of its approvals is a person's look at that one call. Nor is a task
//! without a readable call.

use airlock_policy::Kind;
use airlock_records::review::Caller;

use crate::auth::sha256_hex;
use crate::standing::call_text;
use crate::task::Task;

/// The group of `task`: a hex digest of everything that makes two calls identical, or `""`
/// for a task that is never grouped. The store keeps it with the task.
pub fn group_of(task: &Task) -> String {
    if task.approvals_needed() > 1 {
        return String::new();
    }
    let Some(text) = call_text(task) else { return String::new() };
    let Caller { requested_by, tenant } = task.caller();
    let policy = task.policy().map(|p| (p.name, p.digest));
    let kind = match task.kind() {
        Kind::Approval => "approval",
        Kind::Review => "review",
    };
    let identity = serde_json::json!([requested_by, tenant, policy, task.pool, kind, task.step, text]);
    sha256_hex(&identity.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::human;

    fn task(pool: &str, sample: &str, call: &str, review: bool) -> Task {
        human(pool, sample, call, review, 0).pending("id", 0)
    }

    #[test]
    fn identical_calls_of_other_samples_share_a_group_and_nothing_else_does() {
        let group = group_of(&task("ops", "s1", "c1", false));
        assert_eq!(group.len(), 64);
        assert_eq!(group_of(&task("ops", "s2", "c9", false)), group, "another sample, another call id");
        assert_ne!(group_of(&task("security", "s1", "c1", false)), group, "another pool");
        assert_ne!(group_of(&task("ops", "s1", "c1", true)), group, "a review");
        let mut other = human("ops", "s1", "c1", false, 0);
        other.human.task.as_mut().unwrap().requested_by = "mallory".into();
        assert_ne!(group_of(&other.pending("id", 0)), group, "another caller");
        let mut two = human("ops", "s1", "c1", false, 0);
        two.human.approvals = 2;
        assert_eq!(group_of(&two.pending("id", 0)), "", "a two-person step");
    }
}
