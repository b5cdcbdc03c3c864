//! Who may ask: the tokens file and bearer tokens.
//!
//! The tokens file is a YAML list of callers, each `{name, token_sha256, policies, inline}`
//! (see [`airlock_tokens`]). Only the SHA-256 of a token is stored; `airlock gateway
//! add-token` makes a random token, appends its hash and prints the token once. A caller may
//! name only the policies it lists (`"*"` for any the workers hold) and send a policy
//! document of its own only with `inline: true`.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use airlock_tokens::{TokensError, sha256_hex};

/// The policy pattern that stands for every named policy.
pub const ALL_POLICIES: &str = "*";

/// One caller of the tokens file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// The caller's name: it owns the decisions its requests create.
    pub name: String,
    /// The SHA-256 of the caller's token, lowercase hex.
    pub token_sha256: String,
    /// The named policies the caller may use (`"*"`: any).
    #[serde(default)]
    pub policies: Vec<String>,
    /// Whether the caller may send a policy document of its own.
    #[serde(default)]
    pub inline: bool,
}

impl TokenEntry {
    /// Whether the caller may use the named policy `name`.
    pub fn may_use(&self, name: &str) -> bool {
        self.policies.iter().any(|p| p == name || p == ALL_POLICIES)
    }
}

impl airlock_tokens::Entry for TokenEntry {
    const KIND: &'static str = "caller";

    fn name(&self) -> &str {
        &self.name
    }

    fn token_sha256(&self) -> &str {
        &self.token_sha256
    }

    fn check(&self) -> Result<(), String> {
        if self.policies.is_empty() && !self.inline {
            return Err("list at least one policy, or set inline: true".into());
        }
        Ok(())
    }
}

/// Every caller the gateway knows.
pub type Tokens = airlock_tokens::Tokens<TokenEntry>;

/// Appends a caller with a new random token to the tokens file (created if missing) and
/// returns the token, which is stored nowhere else.
pub fn add_token(path: &Path, name: &str, policies: &[String], inline: bool) -> Result<String, TokensError> {
    let policies = airlock_tokens::quoted_list(policies).ok_or_else(|| TokensError::Invalid {
        path: path.display().to_string(),
        message: "a --policy is empty or holds a quote, a backslash or a line break".into(),
    })?;
    airlock_tokens::add_token::<TokenEntry>(path, name, &[("policies", policies), ("inline", inline.to_string())])
}

#[cfg(test)]
mod tests;
