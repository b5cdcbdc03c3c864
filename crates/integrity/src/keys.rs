//! Key files, key ids and sets of public keys.
//!
//! A key file is text, one key per line, comments after `#`:
//!
//! ```text
//! airlock-fleet-secret <key id> <32-byte seed, hex>      # fleet.key: workers; keep it secret
//! airlock-fleet <key id> <32-byte X25519 key, hex>       # fleet.pub: runners
//! airlock-ed25519-secret <key id> <32-byte seed, hex>    # reviewer.key: a reviewer service
//! airlock-ed25519 <key id> <32-byte Ed25519 key, hex>    # reviewer.pub: workers
//! ```
//!
//! A key id is the first 8 bytes of the SHA-256 of the public key, in hex: what is signed
//! names the key that signed it, and a verifier holding several public keys (during a
//! rotation, the old and the new) picks the right one without trying each.

use std::fmt;
use std::io::Write as _;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};

/// Why a key could not be made, read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The system's random source failed.
    #[error("no randomness available for a new key")]
    Random,
    /// A line of a key file is not a key of the expected kind.
    #[error("{source_name}:{line}: {problem}")]
    Malformed {
        /// The file (or other source) read.
        source_name: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// A public key that would make an agreement with it predictable (of small order).
    #[error("key {0} is of small order")]
    Weak(KeyId),
    /// A key file holds no key.
    #[error("{0}: no key in it")]
    Empty(String),
    /// A key file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The id of a key: the first 8 bytes of its public key's SHA-256, in hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyId(String);

impl KeyId {
    pub(crate) fn of(public: &[u8; 32]) -> Self {
        Self(hex(&crate::digest(public)[..8]))
    }

    /// The id a message names (it is only ever looked up among held keys).
    pub fn from_wire(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A kind of key pair: the tags of its files.
pub trait KeyKind {
    /// The tag of a secret key's line.
    const SECRET_TAG: &'static str;
    /// The tag of a public key's line.
    const PUBLIC_TAG: &'static str;
}

/// A public key with its id.
pub struct PublicKey<K> {
    id: KeyId,
    bytes: [u8; 32],
    kind: PhantomData<K>,
}

impl<K: KeyKind> PublicKey<K> {
    pub(crate) fn new(bytes: [u8; 32]) -> Self {
        Self { id: KeyId::of(&bytes), bytes, kind: PhantomData }
    }

    /// The key's id.
    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// The key's 32 bytes.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// The line of a public key file.
    pub fn to_line(&self) -> String {
        format!("{} {} {}", K::PUBLIC_TAG, self.id, hex(&self.bytes))
    }
}

// Written out rather than derived: a derive would ask the same of the kind marker.
impl<K> Clone for PublicKey<K> {
    fn clone(&self) -> Self {
        Self { id: self.id.clone(), bytes: self.bytes, kind: PhantomData }
    }
}

impl<K> PartialEq for PublicKey<K> {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl<K> fmt::Debug for PublicKey<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey").field("id", &self.id).finish_non_exhaustive()
    }
}

/// The public keys of one kind that a verifier accepts: usually one, two while a key is
/// rotated.
pub struct PublicKeys<K> {
    keys: Vec<PublicKey<K>>,
}

impl<K: KeyKind> PublicKeys<K> {
    /// Reads every key of a public key file's text; `source_name` names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, KeyError> {
        let mut keys = Self::default();
        for line in key_lines::<K>(text, source_name, K::PUBLIC_TAG) {
            let line = line?;
            let key = PublicKey::new(line.bytes);
            line.check_id(&key.id, source_name)?;
            keys.insert(key);
        }
        if keys.keys.is_empty() {
            return Err(KeyError::Empty(source_name.to_owned()));
        }
        Ok(keys)
    }

    /// Reads and merges the public key files at `paths`.
    pub fn load<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self, KeyError> {
        let mut keys = Self::default();
        for path in paths {
            let path = path.as_ref();
            for key in Self::parse(&read(path)?, &path.display().to_string())?.keys {
                keys.insert(key);
            }
        }
        Ok(keys)
    }

    /// Adds `key` (a key already held is kept once).
    pub fn insert(&mut self, key: PublicKey<K>) {
        if !self.keys.contains(&key) {
            self.keys.push(key);
        }
    }

    /// The keys held, in the order they were read.
    pub fn iter(&self) -> impl Iterator<Item = &PublicKey<K>> {
        self.keys.iter()
    }

    /// The held key with id `id`.
    pub fn get(&self, id: &KeyId) -> Option<&PublicKey<K>> {
        self.keys.iter().find(|key| key.id == *id)
    }

    /// The public key file's text.
    pub fn to_file_text(&self) -> String {
        let mut text = String::from("# Airlock public keys: what they vouch for is accepted.\n");
        for key in &self.keys {
            text.push_str(&key.to_line());
            text.push('\n');
        }
        text
    }
}

impl<K> From<PublicKey<K>> for PublicKeys<K> {
    fn from(key: PublicKey<K>) -> Self {
        Self { keys: vec![key] }
    }
}

impl<K> Default for PublicKeys<K> {
    /// No key: nothing is accepted.
    fn default() -> Self {
        Self { keys: Vec::new() }
    }
}

impl<K> Clone for PublicKeys<K> {
    fn clone(&self) -> Self {
        Self { keys: self.keys.clone() }
    }
}

impl<K> fmt::Debug for PublicKeys<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.keys.iter().map(|key| &key.id)).finish()
    }
}

// === secret key files ===

/// A secret key and its file: one line of its kind's secret tag, its id and its 32-byte
/// seed, with the public half in a public key file beside it. A key says how its seed makes
/// it; generating, reading and writing its files are the same for every kind.
pub trait KeyFile: Sized {
    /// The kind of its files.
    type Kind: KeyKind;
    /// What the first line of its key file says of it.
    const COMMENT: &'static str;

    /// The key whose 32-byte seed is `seed`.
    fn from_seed(seed: [u8; 32]) -> Self;

    /// The key's id, which everything it proves or signs names.
    fn id(&self) -> &KeyId;

    /// The public half, for those who check what it proves or signs.
    fn public_key(&self) -> PublicKey<Self::Kind>;

    /// The seed it is made from, which its key file holds: secret.
    fn seed(&self) -> &[u8; 32];

    /// A new random key.
    fn generate() -> Result<Self, KeyError> {
        Ok(Self::from_seed(random_seed()?))
    }

    /// Reads the key from a key file's text, the one key in it checked against the id written
    /// beside it; `source_name` names the text in errors.
    fn parse(text: &str, source_name: &str) -> Result<Self, KeyError> {
        let tag = <Self::Kind as KeyKind>::SECRET_TAG;
        let lines = key_lines::<Self::Kind>(text, source_name, tag).collect::<Result<Vec<_>, _>>()?;
        match lines.as_slice() {
            [] => Err(KeyError::Empty(source_name.to_owned())),
            [line] => {
                let key = Self::from_seed(line.bytes);
                line.check_id(key.id(), source_name)?;
                Ok(key)
            }
            [_, second, ..] => Err(malformed(source_name, second.number, "a secret key file holds exactly one key")),
        }
    }

    /// Reads the key file at `path`.
    fn load(path: &Path) -> Result<Self, KeyError> {
        Self::parse(&read(path)?, &path.display().to_string())
    }

    /// Writes a new key into `dir` as `<name>.key` (readable by its owner only) and
    /// `<name>.pub`, refusing to overwrite either, and returns it.
    fn generate_files(dir: &Path, name: &str) -> Result<Self, KeyError> {
        let key = Self::generate()?;
        let public = PublicKeys::from(key.public_key()).to_file_text();
        write_pair(dir, name, &key.to_file_text(), &public)?;
        Ok(key)
    }

    /// The key file's text.
    fn to_file_text(&self) -> String {
        let tag = <Self::Kind as KeyKind>::SECRET_TAG;
        format!("# {}\n{tag} {} {}\n", Self::COMMENT, self.id(), hex(self.seed()))
    }
}

/// 32 random bytes: the seed of a new secret key.
pub(crate) fn random_seed() -> Result<[u8; 32], KeyError> {
    let mut seed = [0u8; 32];
    SystemRandom::new().fill(&mut seed).map_err(|_| KeyError::Random)?;
    Ok(seed)
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Io { path: path.to_owned(), source })
}

/// Writes `<name>.key` (readable by its owner only) and `<name>.pub` into `dir`, refusing to
/// overwrite either.
fn write_pair(dir: &Path, name: &str, secret: &str, public: &str) -> Result<(), KeyError> {
    std::fs::create_dir_all(dir).map_err(|source| KeyError::Io { path: dir.to_owned(), source })?;
    write_new(&dir.join(format!("{name}.key")), secret, 0o600)?;
    write_new(&dir.join(format!("{name}.pub")), public, 0o644)
}

fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), KeyError> {
    let io = |source| KeyError::Io { path: path.to_owned(), source };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)
}

// === key lines ===

/// One key line of a key file.
struct KeyLine {
    /// The line's number, from 1.
    number: usize,
    /// The key id written on it.
    id: KeyId,
    /// The key's 32 bytes.
    bytes: [u8; 32],
}

impl KeyLine {
    /// Refuses a line whose written id is not the id of its key: a typo or an edit.
    fn check_id(&self, actual: &KeyId, source_name: &str) -> Result<(), KeyError> {
        if self.id == *actual {
            return Ok(());
        }
        let problem = format!("key id {} does not belong to its key (which is {actual})", self.id);
        Err(malformed(source_name, self.number, &problem))
    }
}

/// Each key line tagged `tag`, in a file of keys of kind `K`.
fn key_lines<'a, K: KeyKind>(
    text: &'a str,
    source_name: &'a str,
    tag: &'a str,
) -> impl Iterator<Item = Result<KeyLine, KeyError>> + 'a {
    text.lines().enumerate().filter(|(_, line)| !strip_comment(line).is_empty()).map(move |(index, line)| {
        let number = index + 1;
        let fields: Vec<&str> = strip_comment(line).split_whitespace().collect();
        match fields.as_slice() {
            [found, id, bytes] if *found == tag => {
                let bytes =
                    unhex(bytes).ok_or_else(|| malformed(source_name, number, "the key is not 64 hex digits"))?;
                Ok(KeyLine { number, id: KeyId(id.to_string()), bytes })
            }
            [found, ..] if *found == K::SECRET_TAG || *found == K::PUBLIC_TAG => {
                Err(malformed(source_name, number, &format!("expected a '{tag}' key, found '{found}'")))
            }
            _ => Err(malformed(source_name, number, &format!("expected '{tag} <key id> <hex>'"))),
        }
    })
}

fn strip_comment(line: &str) -> &str {
    line.split_once('#').map_or(line, |(before, _)| before).trim()
}

fn malformed(source_name: &str, line: usize, problem: &str) -> KeyError {
    KeyError::Malformed { source_name: source_name.to_owned(), line, problem: problem.to_owned() }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(bytes)
}
