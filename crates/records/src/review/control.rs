//! The fleet's control as the reviewer API shows and takes it: a task marked as an incident
//! (`POST /api/tasks/{id}/incident`), a switch thrown on a run by an admin
//! (`POST /api/runs/{run}/pause|resume|terminate`), and the runs under control
//! (`GET /api/runs`).

use serde::{Deserialize, Serialize};

/// The body of an incident mark: the person's note, for the log and whoever reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentBody {
    /// What the person found (trimmed; at most 4,000 characters).
    #[serde(default)]
    pub note: Option<String>,
}

/// A task marked as an incident: the entry appended to the control log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentMarked {
    /// The task marked.
    pub task: String,
    /// The run the incident counts in.
    pub run_id: String,
    /// The run's namespace (empty for none).
    pub tenant: String,
    /// Who marked it.
    pub by: String,
    /// Their note (empty for none).
    pub note: String,
}

/// The body of a switch thrown on a run: every field may be left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSwitchBody {
    /// The run's namespace: the gateway token's name for a run asked through the gateway.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Why, recorded with the switch and in the trail of every call it decides.
    #[serde(default)]
    pub reason: Option<String>,
    /// For a pause: the pool of people asked (default: the pool of each call's policy).
    #[serde(default)]
    pub pool: Option<String>,
}

/// A switch thrown on a run, as `airlock run` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSwitched {
    /// The run.
    pub run: String,
    /// Its namespace.
    pub tenant: String,
    /// What the switch says: `human` (a pause), `none` (a resume) or `terminate`.
    pub response: String,
    /// Who threw it.
    pub by: String,
}

/// The runs under control: `{"runs": [...]}`, by tenant then run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunList {
    /// The runs with a switch thrown by hand or incidents marked.
    pub runs: Vec<RunView>,
}

/// A run under control, as the control log made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunView {
    /// Its namespace (empty for none).
    pub tenant: String,
    /// Its id.
    pub run_id: String,
    /// The switch thrown by hand on it, if one holds.
    pub switch: Option<SwitchView>,
    /// What was marked as an incident in it since its last resume (task or decision ids),
    /// sorted.
    pub incidents: Vec<String>,
}

/// A switch thrown by hand on a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchView {
    /// `human`, `policy` or `terminate`.
    pub response: String,
    /// For `human`: the pool it names, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// For `policy`: the policy's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Who threw it.
    pub by: String,
    /// Why (empty for no reason given).
    pub reason: String,
}
