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
use airlock_policy::steps::claude_permissions;
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
        // An inline policy names no files: `settings` paths stay unresolved and are refused.
        let compiled = compile("<inline>", text, kind, None);
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
            Ok(text) => compile(name, &text, kind, Some(dir)),
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

fn compile(source: &str, text: &str, kind: Kind, dir: Option<&Path>) -> Compiled {
    Document::parse(source, text)
        .and_then(|mut document| {
            if let Some(dir) = dir {
                read_settings(&mut document, dir)?;
            }
            Policy::compile(&document, kind)
        })
        .map(Arc::new)
        .map_err(|e| PolicyLookupError::Invalid(e.to_string()))
}

/// Reads the Claude Code settings files a policy document names (`claude_permissions`'s
/// `settings`), relative to `dir`, the directory of the policy file. Only documents read from
/// disk get here; a worker never reads a file an inline policy names.
pub fn read_settings(document: &mut Document, dir: &Path) -> Result<(), airlock_policy::document::PolicyError> {
    claude_permissions::settings::resolve(document, |path| {
        let path = dir.join(path);
        let text = fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let absolute = std::path::absolute(&path).map_err(|e| e.to_string())?;
        Ok((absolute.display().to_string(), text))
    })
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
mod tests;
