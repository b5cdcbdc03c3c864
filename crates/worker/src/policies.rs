//! Where a request's policy comes from: inline in the request (compiled once per text) or
//! by name from the worker's policy directory (compiled again when the file changes).
//!
//! Inline documents are looked up by their text, not by their digest: every request carries
//! its policy, and a SHA-256 of the text per request cost more than the whole lookup should
//! (the digest is computed once, when the document is compiled, and travels with it).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use airlock_contract::v1;
use airlock_policy::Kind;
use airlock_policy::chain::Policy;
use airlock_policy::document::Document;
use airlock_records::code::ErrorCode;

/// How many inline documents (distinct texts) stay compiled; past it the cache starts over.
const INLINE_CACHE_LIMIT: usize = 256;

/// Why a request's policy cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyLookupError {
    /// No inline document and no name, or a name not in the policy directory.
    #[error("{0}")]
    Unknown(String),
    /// The document does not parse or compile for the request's kind.
    #[error("{0}")]
    Invalid(String),
}

impl PolicyLookupError {
    /// The stable code of the wire `Error` reply.
    pub fn code(&self) -> ErrorCode {
        match self {
            PolicyLookupError::Unknown(_) => ErrorCode::UnknownPolicy,
            PolicyLookupError::Invalid(_) => ErrorCode::InvalidPolicy,
        }
    }
}

type Compiled = Result<Arc<Policy>, PolicyLookupError>;

/// Compiled policies, shared by every task of a worker.
#[derive(Debug, Default)]
pub struct PolicyStore {
    dir: Option<PathBuf>,
    /// By the document's text, so a hit costs one hash and one comparison of the text.
    inline: Mutex<HashMap<String, ByKind>>,
    named: Mutex<HashMap<(String, Kind), (FileStamp, Compiled)>>,
}

/// One inline document, compiled for the kinds asked so far.
#[derive(Debug, Default)]
struct ByKind {
    approval: Option<Compiled>,
    review: Option<Compiled>,
}

impl ByKind {
    fn slot(&mut self, kind: Kind) -> &mut Option<Compiled> {
        match kind {
            Kind::Approval => &mut self.approval,
            Kind::Review => &mut self.review,
        }
    }
}

/// What tells a policy file changed.
#[derive(Debug, Clone, PartialEq)]
struct FileStamp {
    path: PathBuf,
    modified: Option<SystemTime>,
    len: u64,
}

impl PolicyStore {
    /// A store that resolves names in `dir` (none: only inline policies).
    pub fn new(dir: Option<PathBuf>) -> Self {
        PolicyStore { dir, ..Default::default() }
    }

    /// The compiled policy a request names, for `kind`.
    pub fn resolve(&self, policy: Option<&v1::Policy>, kind: Kind) -> Compiled {
        match policy.and_then(|p| p.source.as_ref()) {
            Some(v1::policy::Source::Inline(text)) => self.inline(text, kind),
            Some(v1::policy::Source::Name(name)) => self.named(name, kind),
            None => Err(PolicyLookupError::Unknown("the request names no policy".into())),
        }
    }

    /// Compiles outside the cache's lock: nothing a caller's text does while it compiles
    /// can hold (or poison) the cache every other request needs.
    fn inline(&self, text: &str, kind: Kind) -> Compiled {
        if let Some(compiled) = lock(&self.inline).get_mut(text).and_then(|entry| entry.slot(kind).clone()) {
            return compiled;
        }
        let compiled = compile("<inline>", text, kind);
        let mut cache = lock(&self.inline);
        if cache.len() >= INLINE_CACHE_LIMIT && !cache.contains_key(text) {
            cache.clear();
        }
        *cache.entry(text.to_owned()).or_default().slot(kind) = Some(compiled.clone());
        compiled
    }

    fn named(&self, name: &str, kind: Kind) -> Compiled {
        let Some(dir) = &self.dir else {
            return Err(PolicyLookupError::Unknown(format!(
                "policy '{name}' is named, but this worker has no --policy-dir"
            )));
        };
        let stamp = find(dir, name)?;
        let key = (name.to_owned(), kind);
        if let Some((cached, compiled)) = lock(&self.named).get(&key)
            && *cached == stamp
        {
            return compiled.clone();
        }
        // Callers are told the policy's name, never where the worker keeps it.
        let compiled = match fs::read_to_string(&stamp.path) {
            Ok(text) => compile(name, &text, kind),
            Err(e) => Err(PolicyLookupError::Unknown(format!("policy '{name}' cannot be read: {}", e.kind()))),
        };
        lock(&self.named).insert(key, (stamp, compiled.clone()));
        compiled
    }
}

/// A cache, whole even if a thread panicked while holding it: every entry is written in
/// one step, so none is ever half made.
fn lock<T>(cache: &Mutex<T>) -> MutexGuard<'_, T> {
    cache.lock().unwrap_or_else(PoisonError::into_inner)
}

fn compile(source: &str, text: &str, kind: Kind) -> Compiled {
    Document::parse(source, text)
        .and_then(|document| Policy::compile(&document, kind))
        .map(Arc::new)
        .map_err(|e| PolicyLookupError::Invalid(e.to_string()))
}

/// The file for policy `name` in `dir`: `name`, `name.yaml`, `name.yml` or `name.json`.
fn find(dir: &Path, name: &str) -> Result<FileStamp, PolicyLookupError> {
    let safe = !name.is_empty() && !name.contains(['/', '\\']) && !name.starts_with('.');
    if !safe {
        return Err(PolicyLookupError::Unknown(format!("'{name}' is not a policy name")));
    }
    ["", ".yaml", ".yml", ".json"]
        .iter()
        .map(|ext| dir.join(format!("{name}{ext}")))
        .find_map(|path| {
            let meta = fs::metadata(&path).ok().filter(|m| m.is_file())?;
            Some(FileStamp { modified: meta.modified().ok(), len: meta.len(), path })
        })
        .ok_or_else(|| PolicyLookupError::Unknown(format!("this worker holds no policy named '{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> v1::Policy {
        v1::Policy { source: Some(v1::policy::Source::Name(name.into())), digest: String::new() }
    }

    fn inline(text: &str) -> v1::Policy {
        v1::Policy { source: Some(v1::policy::Source::Inline(text.into())), digest: String::new() }
    }

    #[test]
    fn inline_policies_compile_once_per_text_and_kind() {
        let store = PolicyStore::new(None);
        let text = "approvers:\n  - name: auto\n    tools: a\nreviewers:\n  - name: auto\n    tools: b\n";
        let first = store.resolve(Some(&inline(text)), Kind::Approval).unwrap();
        let again = store.resolve(Some(&inline(text)), Kind::Approval).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "a second request reuses the compiled policy");
        assert_eq!(first.digest(), airlock_policy::document::digest(text));
        let review = store.resolve(Some(&inline(text)), Kind::Review).unwrap();
        assert_eq!(review.kind(), Kind::Review);
        assert!(Arc::ptr_eq(&review, &store.resolve(Some(&inline(text)), Kind::Review).unwrap()));
        let other = store.resolve(Some(&inline(&text.replace("tools: a", "tools: c"))), Kind::Approval).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_ne!(first.digest(), other.digest());
        // A document that does not compile for a kind stays an error for that kind only.
        let approvals_only = "approvers:\n  - name: auto\n    tools: a\n";
        assert!(store.resolve(Some(&inline(approvals_only)), Kind::Approval).is_ok());
        assert!(matches!(
            store.resolve(Some(&inline(approvals_only)), Kind::Review),
            Err(PolicyLookupError::Invalid(_))
        ));
        assert!(store.resolve(Some(&inline(approvals_only)), Kind::Approval).is_ok());
    }

    #[test]
    fn named_policies_reload_when_their_file_changes() {
        let dir = std::env::temp_dir().join(format!("airlock-policies-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("strict.yaml");
        fs::write(&file, "approvers:\n  - name: auto\n    tools: a\n").unwrap();
        let store = PolicyStore::new(Some(dir.clone()));
        let first = store.resolve(Some(&named("strict")), Kind::Approval).unwrap();
        assert_eq!(first.steps().len(), 1);
        fs::write(&file, "approvers:\n  - name: auto\n    tools: a\n  - name: human\n    tools: b\n").unwrap();
        let second = store.resolve(Some(&named("strict")), Kind::Approval).unwrap();
        assert_eq!(second.steps().len(), 2);
        assert_ne!(first.digest(), second.digest());
        assert!(matches!(store.resolve(Some(&named("../etc")), Kind::Approval), Err(PolicyLookupError::Unknown(_))));
        assert!(matches!(store.resolve(Some(&named("missing")), Kind::Approval), Err(PolicyLookupError::Unknown(_))));
        assert!(matches!(store.resolve(Some(&named("strict")), Kind::Review), Err(PolicyLookupError::Invalid(_))));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn errors_about_named_policies_never_show_the_policy_dir() {
        let dir = std::env::temp_dir().join(format!("airlock-policy-dir-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("broken.yaml"), "approvers:\n  - name: auto\n    tools: 3\n").unwrap();
        fs::create_dir_all(dir.join("folder.yaml")).unwrap();
        let store = PolicyStore::new(Some(dir.clone()));
        for name in ["broken", "missing", "folder", "../broken"] {
            let error = store.resolve(Some(&named(name)), Kind::Approval).unwrap_err().to_string();
            assert!(!error.contains(dir.to_str().unwrap()) && !error.contains("airlock-policy-dir"), "{error}");
            assert!(error.contains(name), "{error}");
        }
        let broken = store.resolve(Some(&named("broken")), Kind::Approval).unwrap_err().to_string();
        assert!(broken.starts_with("broken:3:12: 'tools' must be a string"), "{broken}");
        fs::remove_dir_all(dir).unwrap();
    }

    /// A panic while the cache is held (here: forced, in another thread) leaves it usable.
    #[test]
    fn a_poisoned_cache_still_serves() {
        let store = PolicyStore::new(None);
        let text = "approvers:\n  - name: auto\n    tools: a\n";
        std::thread::scope(|scope| {
            let poisoned = scope.spawn(|| {
                let _held = store.inline.lock().unwrap();
                panic!("a handler failed while holding the cache");
            });
            assert!(poisoned.join().is_err());
        });
        assert!(store.inline.is_poisoned());
        assert!(store.resolve(Some(&inline(text)), Kind::Approval).is_ok());
        assert!(store.resolve(Some(&inline(text)), Kind::Approval).is_ok(), "and again, from the cache");
    }
}
