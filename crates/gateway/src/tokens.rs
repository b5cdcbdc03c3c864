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
mod tests {
    use super::*;

    fn entry(name: &str, token: &str, policies: &[&str], inline: bool) -> TokenEntry {
        TokenEntry {
            name: name.into(),
            token_sha256: sha256_hex(token),
            policies: policies.iter().map(|p| (*p).to_owned()).collect(),
            inline,
        }
    }

    #[test]
    fn a_token_names_its_entry_and_nothing_else() {
        let tokens = Tokens::from_list(vec![entry("a", "ta", &["p"], false), entry("b", "tb", &["*"], true)]);
        assert_eq!(tokens.authenticate("ta").map(|e| e.name.as_str()), Some("a"));
        assert_eq!(tokens.authenticate("tb").map(|e| e.name.as_str()), Some("b"));
        assert!(tokens.authenticate("tc").is_none());
        assert!(tokens.authenticate("").is_none());
        assert!(tokens.authenticate("t a").is_none());
        assert!(tokens.authenticate(&sha256_hex("ta")).is_none(), "the hash itself is no token");
    }

    #[test]
    fn policies_are_allowed_by_name_or_by_star() {
        let a = entry("a", "ta", &["alpha"], false);
        assert!(a.may_use("alpha"));
        assert!(!a.may_use("beta"));
        assert!(!a.may_use("alpha*"));
        assert!(entry("s", "ts", &["*"], false).may_use("anything"));
    }

    #[test]
    fn a_file_with_bad_entries_is_refused_with_the_reason() {
        let hash = sha256_hex("t");
        let cases = [
            ("- {name: a, token_sha256: abc, policies: [p]}", "64 hex digits"),
            (&format!("- {{name: 'a b', token_sha256: {hash}, policies: [p]}}") as &str, "letters, digits"),
            (&format!("- {{name: a, token_sha256: {hash}}}"), "at least one policy"),
            (
                &format!(
                    "- {{name: a, token_sha256: {hash}, policies: [p]}}\n- {{name: a, token_sha256: {}, policies: [p]}}",
                    sha256_hex("u")
                ),
                "listed twice",
            ),
            (
                &format!(
                    "- {{name: a, token_sha256: {hash}, policies: [p]}}\n- {{name: b, token_sha256: {hash}, policies: [p]}}"
                ),
                "token of another",
            ),
            (&format!("- {{name: a, token_sha256: {hash}, policies: [p], pools: [x]}}"), "pools"),
        ];
        for (text, expected) in cases {
            let error = Tokens::parse(text, "tokens.yaml").unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn add_token_appends_an_entry_whose_token_authenticates() {
        let dir = std::env::temp_dir().join(format!("airlock-gateway-tokens-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.yaml");
        let first = add_token(&path, "alpha", &["a".into()], false).unwrap();
        let second = add_token(&path, "beta", &[], true).unwrap();
        assert!(add_token(&path, "beta", &["b".into()], false).unwrap_err().to_string().contains("exists already"));
        assert!(add_token(&path, "gamma", &[], false).unwrap_err().to_string().contains("at least one policy"));
        let tokens = Tokens::load(&path).unwrap();
        assert_eq!(tokens.len(), 2);
        let alpha = tokens.authenticate(&first).unwrap();
        assert!(alpha.may_use("a") && !alpha.inline);
        let beta = tokens.authenticate(&second).unwrap();
        assert!(beta.inline && !beta.may_use("a"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&first) && !text.contains(&second), "tokens are not stored");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
