//! Why a message could not be handled: the code a runner's `Error` reply carries, and the
//! reason a dead-lettered message's header records.
//!
//! The header reads `"{code}: {text}"` for people; metrics label by [`ErrorCode`] alone,
//! taken from the typed [`DeadReason`] rather than split back out of the header text.

use std::fmt;
use std::str::FromStr;

/// The stable codes of the wire `Error` reply and of dead-letter reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The message does not decode, or lacks a part it needs.
    BadMessage,
    /// The request names no policy, or one the worker does not hold.
    UnknownPolicy,
    /// The policy does not parse or compile for the request's kind.
    InvalidPolicy,
    /// An external step's answer cannot be read.
    InvalidAnswer,
    /// A step's answer makes the sample fail, as it would in Inspect.
    StepFailed,
    /// The message is not one the fleet may take: chain state it did not seal, an answer to
    /// another or a built-in step, or an answer not proven to come from who must give it.
    Refused,
}

impl ErrorCode {
    /// Every code, for tests and documentation.
    pub const ALL: [ErrorCode; 6] = [
        ErrorCode::BadMessage,
        ErrorCode::UnknownPolicy,
        ErrorCode::InvalidPolicy,
        ErrorCode::InvalidAnswer,
        ErrorCode::StepFailed,
        ErrorCode::Refused,
    ];

    /// The code as the wire and the metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadMessage => "bad_message",
            ErrorCode::UnknownPolicy => "unknown_policy",
            ErrorCode::InvalidPolicy => "invalid_policy",
            ErrorCode::InvalidAnswer => "invalid_answer",
            ErrorCode::StepFailed => "step_failed",
            ErrorCode::Refused => "refused",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for ErrorCode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL.into_iter().find(|code| code.as_str() == s).ok_or_else(|| format!("unknown error code '{s}'"))
    }
}

/// Why a message goes to the dead-letter queue: a code for metrics and replies, and words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadReason {
    /// What kind of failure.
    pub code: ErrorCode,
    /// What exactly went wrong.
    pub text: String,
}

impl DeadReason {
    /// A reason with its code and words.
    pub fn new(code: ErrorCode, text: impl Into<String>) -> Self {
        DeadReason { code, text: text.into() }
    }

    /// A message that does not decode or lacks a part.
    pub fn bad_message(text: impl Into<String>) -> Self {
        DeadReason::new(ErrorCode::BadMessage, text)
    }
}

/// The header's text: `"{code}: {text}"`.
impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_back_from_their_spelling() {
        for code in ErrorCode::ALL {
            assert_eq!(code.as_str().parse::<ErrorCode>(), Ok(code));
        }
        assert!("timeout".parse::<ErrorCode>().is_err());
    }

    #[test]
    fn a_reason_reads_code_colon_text() {
        let reason = DeadReason::new(ErrorCode::InvalidPolicy, "<inline>:1:12: bad");
        assert_eq!(reason.to_string(), "invalid_policy: <inline>:1:12: bad");
    }
}
