//! The decision log: one [`DecisionRecord`] per line, each decision once, masked.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use airlock_contract::v1;
use airlock_records::view::DecisionRecord;
use serde_json::Value;

/// What a masked value reads as.
pub const MASK: &str = "***";

/// The log file cannot be opened or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct LogError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub source: io::Error,
}

/// An open decision log, appended to.
#[derive(Debug)]
pub struct DecisionLog {
    path: PathBuf,
    file: File,
    mask: Vec<String>,
    /// The decision ids already in the file, so a redelivered decision is not written twice.
    seen: HashSet<String>,
}

impl DecisionLog {
    /// Opens (or creates) the log at `path`, reading the ids it holds already; values of the
    /// keys in `mask` are written as [`MASK`].
    pub fn open(path: &Path, mask: Vec<String>) -> Result<Self, LogError> {
        let error = |source| LogError { path: path.to_owned(), source };
        let seen = recorded_ids(path).map_err(error)?;
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(error)?;
        // A process killed halfway through a line left it torn: the next record starts a line
        // of its own, or it would be unreadable too.
        if torn(path).map_err(error)? {
            file.write_all(b"\n").map_err(error)?;
        }
        Ok(DecisionLog { path: path.to_owned(), file, mask, seen })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `decision` as one flushed line, unless its id is in the log already; `true`
    /// when it was written.
    pub fn append(&mut self, decision: &v1::Decision) -> Result<bool, LogError> {
        if self.seen.contains(&decision.decision_id) {
            return Ok(false);
        }
        let mut record = serde_json::to_value(DecisionRecord::from_wire(decision))
            .expect("a decision record serialises: its maps have string keys");
        mask_keys(&mut record, &self.mask);
        // One write for the whole line: formatted straight into the file, a record goes out in
        // many, and a kill between them tears it.
        let mut line = record.to_string().into_bytes();
        line.push(b'\n');
        self.file.write_all(&line).map_err(|source| LogError { path: self.path.clone(), source })?;
        self.seen.insert(decision.decision_id.clone());
        Ok(true)
    }
}

/// Replaces the value of every object key in `mask`, at any depth.
pub fn mask_keys(value: &mut Value, mask: &[String]) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if mask.iter().any(|m| m == key) {
                    *inner = Value::String(MASK.into());
                } else {
                    mask_keys(inner, mask);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| mask_keys(item, mask)),
        _ => {}
    }
}

/// The decision ids in the log at `path`; none when it does not exist yet. Lines that are
/// not records (a torn last line) are passed over: their decision is written again.
fn recorded_ids(path: &Path) -> io::Result<HashSet<String>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e),
    };
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<IdOnly>(&line).ok())
        .map(|record| record.decision_id)
        .collect())
}

/// Whether the file at `path` ends halfway through a line.
fn torn(path: &Path) -> io::Result<bool> {
    let mut file = File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The one field deduplication needs; the rest of a (possibly masked) record is not read.
#[derive(serde::Deserialize)]
struct IdOnly {
    decision_id: String,
}

#[cfg(test)]
mod tests;
