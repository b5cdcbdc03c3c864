//! Claims as the reviewer API shows and takes them: a reviewer holds a pending task for a
//! while (`POST /api/tasks/{id}/claim`), others see who and until when (a task's `claim`, a
//! refusal's), and the holder lets it go (`DELETE /api/tasks/{id}/claim`).

use serde::{Deserialize, Serialize};

/// Who holds a task, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    /// The reviewer holding it.
    pub by: String,
    /// When the claim ends by itself (unix ms).
    pub until_unix_ms: i64,
}

/// The body of a claim: how long, in seconds (the service's default when absent; at most its
/// maximum).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// How long to hold the task, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

/// A claim taken: the task, who holds it and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// The task's id.
    pub task: String,
    /// Who holds it, until when.
    #[serde(flatten)]
    pub claim: ClaimView,
}
