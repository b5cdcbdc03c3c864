//! What an outcome answers with, the same in a response and in a webhook's event: its status
//! and, unless it is a decision, its error body.

use axum::http::StatusCode;
use serde::Serialize;

use crate::decisions::{Failure, Outcome};

/// An error's body: `{"code", "message", "field"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    /// A stable code, e.g. `invalid_field`.
    pub code: String,
    /// What is wrong, for people.
    pub message: String,
    /// The field at fault, as a path (`call.id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ErrorBody {
    /// The error an outcome answers with; `None` for a decision.
    pub fn of_outcome(outcome: &Outcome) -> Option<Self> {
        let (code, message) = match outcome {
            Outcome::Decided(_) => return None,
            Outcome::Refused(refusal) => (refusal.code.clone(), refusal.message.clone()),
            Outcome::Failed(Failure::AlreadyPending(key)) => {
                ("already_pending".to_owned(), format!("a request for {key} is already pending"))
            }
            Outcome::Failed(Failure::Unavailable(why)) => {
                ("fleet_unavailable".to_owned(), format!("the request did not reach the fleet: {why}"))
            }
            Outcome::Failed(Failure::Restarted) => (
                "gateway_restarted".to_owned(),
                "the gateway stopped before the fleet's decision came; send the request again".to_owned(),
            ),
        };
        Some(ErrorBody { code, message, field: None })
    }
}

/// The status an outcome answers with.
pub fn status_of(outcome: &Outcome) -> StatusCode {
    match outcome {
        Outcome::Decided(_) => StatusCode::OK,
        Outcome::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
        Outcome::Failed(Failure::AlreadyPending(_)) => StatusCode::CONFLICT,
        Outcome::Failed(Failure::Unavailable(_) | Failure::Restarted) => StatusCode::SERVICE_UNAVAILABLE,
    }
}
