//! Grouped calls as the reviewer API shows and takes them: `GET /api/groups` (the groups of
//! identical pending calls) and `POST /api/groups/{group}/decision` (one confirmed decision
//! for every task of a group).

use serde::{Deserialize, Serialize};

use super::TaskView;

/// A group of identical pending calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupView {
    /// The group's identity, used in URLs.
    pub group: String,
    /// Its pending tasks within the caller's pools.
    pub count: u64,
    /// When its oldest pending task arrived (unix ms).
    pub oldest_unix_ms: i64,
    /// Its oldest pending task: what every task of the group asks.
    pub task: TaskView,
}

/// `GET /api/groups`: the caller's groups, the largest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupList {
    /// The groups.
    pub groups: Vec<GroupView>,
}

/// The body of `POST /api/groups/{group}/decision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDecisionBody {
    /// One of the group's choices (not `modify`).
    pub decision: String,
    /// Why; Inspect's fixed text when absent or blank.
    #[serde(default)]
    pub explanation: Option<String>,
    /// The number of tasks the reviewer confirmed: the group's count when they were shown it.
    pub count: u64,
}

/// A task of a group left as it was, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRefusal {
    /// The task's id.
    pub task: String,
    /// Why it was not decided.
    pub error: String,
}

/// What a group decision did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDecided {
    /// The ids of the tasks decided, each on its own.
    pub decided: Vec<String>,
    /// The tasks left as they were.
    pub refused: Vec<GroupRefusal>,
}
