//! `bash_allowlist`: placeholder until the shell parser lands.
use super::{ParamError, Params, Subject};
use crate::call::Answer;
use std::fmt;
/// The step's name in a policy file.
pub const NAME: &str = "bash_allowlist";
/// Placeholder.
#[derive(Debug, Clone, PartialEq)]
pub struct BashAllowlist;
impl BashAllowlist {
    /// Placeholder.
    pub fn from_params(_params: &Params) -> Result<Self, ParamError> {
        Ok(BashAllowlist)
    }
    /// Placeholder.
    pub fn decide(&self, _subject: &Subject<'_>) -> Answer {
        Answer::escalate("not implemented")
    }
}
impl fmt::Display for BashAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bash_allowlist")
    }
}
