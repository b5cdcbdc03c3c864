//! Who may ask: the tokens file and bearer tokens.
//!
//! The tokens file is a YAML list of callers, each `{name, token_sha256, policies, inline}`.
//! Only the SHA-256 of a token is stored; `airlock gateway add-token` makes a random token,
//! appends its hash and prints the token once. A caller may name only the policies it lists
//! (`"*"` for any the workers hold) and send a policy document of its own only with
//! `inline: true`. Every hash is compared, in constant time, so a lookup takes as long
//! whichever entry (if any) matches.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// What is wrong with a tokens file or a new entry.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a list of callers (the message has line and column).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// An entry is not valid.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Every caller the gateway knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    list: Vec<TokenEntry>,
}

impl Tokens {
    /// Reads and checks a tokens file.
    pub fn load(path: &Path) -> Result<Self, TokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Io { path: shown.clone(), source })?;
        Self::parse(&text, &shown)
    }

    /// Reads and checks the text of a tokens file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, TokensError> {
        let list: Vec<TokenEntry> = if text.trim().is_empty() {
            Vec::new()
        } else {
            serde_saphyr::from_str(text)
                .map_err(|e| TokensError::Parse { path: origin.to_owned(), message: e.to_string() })?
        };
        let invalid = |message: String| TokensError::Invalid { path: origin.to_owned(), message };
        for (index, entry) in list.iter().enumerate() {
            check_name(&entry.name).map_err(|m| invalid(format!("entry {}: {m}", index + 1)))?;
            let hash = &entry.token_sha256;
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid(format!("'{}': token_sha256 must be 64 hex digits", entry.name)));
            }
            if entry.policies.is_empty() && !entry.inline {
                return Err(invalid(format!("'{}': list at least one policy, or set inline: true", entry.name)));
            }
            if list[..index].iter().any(|other| other.name == entry.name) {
                return Err(invalid(format!("'{}' is listed twice", entry.name)));
            }
            if list[..index].iter().any(|other| other.token_sha256.eq_ignore_ascii_case(hash)) {
                return Err(invalid(format!("'{}' has the token of another entry", entry.name)));
            }
        }
        Ok(Tokens { list })
    }

    /// Callers from a list (tests, embedding).
    pub fn from_list(list: Vec<TokenEntry>) -> Self {
        Tokens { list }
    }

    /// The caller whose token this is. Every entry's hash is compared, whichever matches.
    pub fn authenticate(&self, token: &str) -> Option<&TokenEntry> {
        let hash = sha256_hex(token);
        let mut found = None;
        for entry in &self.list {
            if constant_time_eq(entry.token_sha256.to_ascii_lowercase().as_bytes(), hash.as_bytes()) {
                found = Some(entry);
            }
        }
        found
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// A caller name: letters, digits and `._@-`, 1 to 64 of them.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'));
    if ok { Ok(()) } else { Err(format!("name '{name}' must be 1 to 64 letters, digits or . _ @ -")) }
}

/// Appends a caller with a new random token to the tokens file (created if missing) and
/// returns the token, which is stored nowhere else.
pub fn add_token(path: &Path, name: &str, policies: &[String], inline: bool) -> Result<String, TokensError> {
    let shown = path.display().to_string();
    let invalid = |message: String| TokensError::Invalid { path: shown.clone(), message };
    check_name(name).map_err(invalid)?;
    if policies.iter().any(|p| p.is_empty() || p.contains(['\n', '"', '\\'])) {
        return Err(invalid("a --policy is empty or holds a quote, a backslash or a line break".into()));
    }
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(TokensError::Io { path: shown, source }),
    };
    let tokens = Tokens::parse(&existing, &shown)?;
    if tokens.list.iter().any(|entry| entry.name == name) {
        return Err(invalid(format!("an entry named '{name}' exists already")));
    }
    let token = new_token();
    let mut entry = String::new();
    if !existing.is_empty() && !existing.ends_with('\n') {
        entry.push('\n');
    }
    let policies: Vec<String> = policies.iter().map(|p| format!("\"{p}\"")).collect();
    let _ = writeln!(
        entry,
        "- name: {name}\n  token_sha256: {}\n  policies: [{}]\n  inline: {inline}",
        sha256_hex(&token),
        policies.join(", ")
    );
    let mut text = existing;
    text.push_str(&entry);
    Tokens::parse(&text, &shown)?;
    write_private(path, &text).map_err(|source| TokensError::Io { path: shown, source })?;
    Ok(token)
}

/// Writes the file readable by its owner only (it lists who may ask).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(tmp, path)
}

/// A fresh random token: 32 bytes from the OS, hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    hex(&bytes)
}

/// SHA-256 of `text`, lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
        assert!(tokens.authenticate(" ta").is_none());
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
