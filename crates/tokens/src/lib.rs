//! Tokens files: who may use a service, as a YAML list of named entries, each with the
//! SHA-256 of its bearer token (the token itself is stored nowhere). The reviewer service's
//! reviewers and the gateway's callers are such files, each entry with rights of its own.
//!
//! A lookup compares every entry's hash in constant time, so it takes as long whichever entry
//! (if any) matches. [`add_token`] appends an entry with a new random token, written readable
//! by its owner only, and returns the token once.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

use std::fmt::Write as _;
use std::path::Path;

use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// One entry of a tokens file.
pub trait Entry: DeserializeOwned {
    /// What the file calls an entry in its errors (`reviewer`, `caller`).
    const KIND: &'static str;
    /// The entry's name, unique in its file whatever its case.
    fn name(&self) -> &str;
    /// The SHA-256 of the entry's token, hex.
    fn token_sha256(&self) -> &str;
    /// The entry's own rules, beyond its name and hash.
    fn check(&self) -> Result<(), String>;
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
    /// The file is not a list of entries (the message has line and column).
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

/// Every entry of a tokens file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens<E> {
    list: Vec<E>,
}

impl<E> Default for Tokens<E> {
    fn default() -> Self {
        Tokens { list: Vec::new() }
    }
}

impl<E: Entry> Tokens<E> {
    /// Reads and checks a tokens file.
    pub fn load(path: &Path) -> Result<Self, TokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Io { path: shown.clone(), source })?;
        Self::parse(&text, &shown)
    }

    /// Reads and checks the text of a tokens file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, TokensError> {
        let list: Vec<E> = if text.trim().is_empty() {
            Vec::new()
        } else {
            serde_saphyr::from_str(text)
                .map_err(|e| TokensError::Parse { path: origin.to_owned(), message: e.to_string() })?
        };
        let invalid = |message: String| TokensError::Invalid { path: origin.to_owned(), message };
        let kind = E::KIND;
        for (index, entry) in list.iter().enumerate() {
            check_name(entry.name()).map_err(|m| invalid(format!("{kind} {}: {m}", index + 1)))?;
            let (name, hash) = (entry.name(), entry.token_sha256());
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid(format!("{kind} '{name}': token_sha256 must be 64 hex digits")));
            }
            entry.check().map_err(|m| invalid(format!("{kind} '{name}': {m}")))?;
            // People and callers are told apart by name, whatever its case: `Alice` and
            // `alice` are one.
            if let Some(other) = list[..index].iter().find(|other| other.name().eq_ignore_ascii_case(name)) {
                let same = if other.name() == name { String::new() } else { format!(" (as '{}')", other.name()) };
                return Err(invalid(format!("{kind} '{name}' is listed twice{same}; names are compared without case")));
            }
            if list[..index].iter().any(|other| other.token_sha256().eq_ignore_ascii_case(hash)) {
                return Err(invalid(format!("{kind} '{name}' has the token of another {kind}")));
            }
        }
        Ok(Tokens { list })
    }

    /// The entry whose token this is (surrounding blanks ignored). Every entry's hash is
    /// compared, whichever matches.
    pub fn authenticate(&self, token: &str) -> Option<&E> {
        let hash = sha256_hex(token.trim());
        let mut found = None;
        for entry in &self.list {
            if constant_time_eq(entry.token_sha256().to_ascii_lowercase().as_bytes(), hash.as_bytes()) {
                found = Some(entry);
            }
        }
        found
    }

    /// The entry called `name`, whatever its case.
    pub fn by_name(&self, name: &str) -> Option<&E> {
        self.list.iter().find(|entry| entry.name().eq_ignore_ascii_case(name))
    }
}

impl<E> Tokens<E> {
    /// Entries from a list (tests, embedding).
    pub fn from_list(list: Vec<E>) -> Self {
        Tokens { list }
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

/// An entry's name: letters, digits and `._@-`, 1 to 64 of them.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'));
    if ok { Ok(()) } else { Err(format!("name '{name}' must be 1 to 64 letters, digits or . _ @ -")) }
}

/// A YAML list of `values` in double quotes, for [`add_token`]'s `fields`; refused when a
/// value is empty or holds a quote, a backslash or a line break.
pub fn quoted_list(values: &[String]) -> Option<String> {
    let bad = values.iter().any(|v| v.is_empty() || v.contains(['\n', '"', '\\']));
    (!bad).then(|| format!("[{}]", values.iter().map(|v| format!("\"{v}\"")).collect::<Vec<_>>().join(", ")))
}

/// Appends an entry called `name` with a new random token to the tokens file at `path`
/// (created if missing) and returns the token, which is stored nowhere else. `fields` are
/// the entry's own lines after its name and hash, each `  key: value`; the file is read back
/// as `E` before it is written.
pub fn add_token<E: Entry>(path: &Path, name: &str, fields: &[(&str, String)]) -> Result<String, TokensError> {
    let shown = path.display().to_string();
    let invalid = |message: String| TokensError::Invalid { path: shown.clone(), message };
    check_name(name).map_err(invalid)?;
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(TokensError::Io { path: shown, source }),
    };
    let tokens = Tokens::<E>::parse(&existing, &shown)?;
    if tokens.by_name(name).is_some() {
        return Err(invalid(format!("a {} named '{name}' exists already", E::KIND)));
    }
    let token = new_token();
    let mut text = existing;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = writeln!(text, "- name: {name}\n  token_sha256: {}", sha256_hex(&token));
    for (key, value) in fields {
        let _ = writeln!(text, "  {key}: {value}");
    }
    Tokens::<E>::parse(&text, &shown)?;
    write_private(path, &text).map_err(|source| TokensError::Io { path: shown, source })?;
    Ok(token)
}

/// Writes the file readable by its owner only (it lists who may use the service).
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
    random_hex::<32>()
}

/// `N` random bytes from the OS, as lowercase hex.
pub fn random_hex<const N: usize>() -> String {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    hex(&bytes)
}

/// SHA-256 of `text`, lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Compares without stopping at the first difference.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Person {
        name: String,
        token_sha256: String,
    }

    impl Entry for Person {
        const KIND: &'static str = "reviewer";
        fn name(&self) -> &str {
            &self.name
        }
        fn token_sha256(&self) -> &str {
            &self.token_sha256
        }
        fn check(&self) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn names_that_differ_only_in_case_are_one_name() {
        let file = format!(
            "- {{name: alice, token_sha256: {}}}\n- {{name: Alice, token_sha256: {}}}",
            sha256_hex("a"),
            sha256_hex("b")
        );
        let error = Tokens::<Person>::parse(&file, "reviewers.yaml").err().expect("refused").to_string();
        assert!(error.contains("'Alice' is listed twice (as 'alice')"), "{error}");
        let one =
            Tokens::<Person>::parse(&format!("- {{name: alice, token_sha256: {}}}", sha256_hex("a")), "f").unwrap();
        assert_eq!(one.by_name("ALICE").map(Person::name), Some("alice"));
    }
}
