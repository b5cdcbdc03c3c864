//! Inspect's eval logs, read for the control report: each sample's run, id, epoch, eval mode
//! and main- and side-task success.
//!
//! A `.eval` log is a zip archive of JSON members (`header.json`, `samples/<id>_epoch_<n>.json`,
//! …); inspect-ai 0.3.285 compresses them with zstd (zip method 93), older versions with
//! deflate, and both are read here without Python. A `.json` log is one JSON document with the
//! header's fields and a `samples` array. A running `.eval` log has no `header.json` yet; its
//! `_journal/start.json` holds the same `eval` part.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use airlock_records::view::EvalMode;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The scores that say whether a sample's main and side tasks succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreNames {
    /// The main task's (ControlArena: `main_task_success`).
    pub main: String,
    /// The side task's (ControlArena: `side_task_success`).
    pub side: String,
}

/// One sample's epoch, as the eval log scored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalSample {
    /// The eval's id (`eval.eval_id`): the run of the calls' keys.
    pub run: String,
    /// The sample's id.
    pub sample: String,
    /// The epoch, from 1.
    pub epoch: u32,
    /// `eval_mode` from the sample's metadata, else from the task's.
    pub mode: Option<EvalMode>,
    /// The main task succeeded; none when it was not scored.
    pub main: Option<bool>,
    /// The side task succeeded; none when it was not scored.
    pub side: Option<bool>,
}

/// An eval log that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct EvalLogError {
    /// The log.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

/// The parts of a log's `eval` that the report reads.
#[derive(Debug, Deserialize)]
struct Eval {
    eval_id: String,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

/// The parts of a sample that the report reads.
#[derive(Debug, Deserialize)]
struct RawSample {
    id: Value,
    epoch: u32,
    #[serde(default)]
    scores: Option<Map<String, Value>>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

/// Reads the samples of the eval log at `path` (`.eval` or `.json`).
pub fn read(path: &Path, names: &ScoreNames) -> Result<Vec<EvalSample>, EvalLogError> {
    let fail = |message: String| EvalLogError { path: path.to_owned(), message };
    let (eval, raw) = if path.extension().is_some_and(|e| e == "json") {
        #[derive(Deserialize)]
        struct Document {
            eval: Eval,
            #[serde(default)]
            samples: Vec<RawSample>,
        }
        let file = File::open(path).map_err(|e| fail(e.to_string()))?;
        let document: Document =
            serde_json::from_reader(BufReader::new(file)).map_err(|e| fail(format!("not an Inspect log: {e}")))?;
        (document.eval, document.samples)
    } else {
        read_zip(path).map_err(fail)?
    };
    let task_mode = mode_in(eval.metadata.as_ref());
    raw.into_iter()
        .map(|sample| {
            let id = match &sample.id {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            let success = |name: &str| {
                success(sample.scores.as_ref(), name)
                    .map_err(|message| fail(format!("sample {id} epoch {}: {message}", sample.epoch)))
            };
            Ok(EvalSample {
                run: eval.eval_id.clone(),
                main: success(&names.main)?,
                side: success(&names.side)?,
                mode: mode_in(sample.metadata.as_ref()).or(task_mode),
                sample: id,
                epoch: sample.epoch,
            })
        })
        .collect()
}

/// The `eval` part and the samples of a `.eval` archive.
fn read_zip(path: &Path) -> Result<(Eval, Vec<RawSample>), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| format!("not a .eval archive: {e}"))?;
    let (mut header, mut start, mut samples) = (None, None, Vec::new());
    for index in 0..archive.len() {
        let member = archive.by_index_raw(index).map_err(|e| e.to_string())?;
        let name = member.name().map_err(|e| e.to_string())?.into_owned();
        drop(member);
        let slot = match name.as_str() {
            "header.json" => &mut header,
            "_journal/start.json" => &mut start,
            _ if name.starts_with("samples/") && name.ends_with(".json") => {
                let sample: RawSample = serde_json::from_slice(&member_bytes(&mut archive, index)?)
                    .map_err(|e| format!("{name}: not a sample: {e}"))?;
                samples.push(sample);
                continue;
            }
            _ => continue,
        };
        *slot = Some(member_bytes(&mut archive, index)?);
    }
    #[derive(Deserialize)]
    struct Header {
        eval: Eval,
    }
    let bytes = header.or(start).ok_or("neither header.json nor _journal/start.json: not an Inspect log")?;
    let header: Header = serde_json::from_slice(&bytes).map_err(|e| format!("header: {e}"))?;
    Ok((header.eval, samples))
}

/// The bytes of member `index`, decompressed.
fn member_bytes(archive: &mut zip::ZipArchive<BufReader<File>>, index: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let raw = archive.by_index_raw(index).map_err(|e| e.to_string())?;
    if raw.compression() == zip::CompressionMethod::ZSTD {
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(raw).map_err(|e| format!("zstd: {e}"))?;
        decoder.read_to_end(&mut bytes).map_err(|e| format!("zstd: {e}"))?;
    } else {
        drop(raw);
        archive.by_index(index).map_err(|e| e.to_string())?.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

fn mode_in(metadata: Option<&Map<String, Value>>) -> Option<EvalMode> {
    EvalMode::parse(metadata?.get("eval_mode")?.as_str()?)
}

/// Whether the score `name` says success: a score of that name, or a value of that name in a
/// score whose value is an object (ControlArena's scorers), read as Inspect writes it.
fn success(scores: Option<&Map<String, Value>>, name: &str) -> Result<Option<bool>, String> {
    let Some(scores) = scores else { return Ok(None) };
    let value = scores
        .get(name)
        .and_then(|score| score.get("value"))
        .or_else(|| scores.values().find_map(|score| score.get("value")?.as_object()?.get(name)));
    value.map_or(Ok(None), |value| read_success(value).map_err(|e| format!("score {name}: {e}")))
}

/// `C`/`I` (Inspect's CORRECT and INCORRECT; `P`artial is no success, `N`o answer none),
/// `true`/`false`, `1`/`0`.
pub fn read_success(value: &Value) -> Result<Option<bool>, String> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        Value::String(s) => match s.as_str() {
            "C" => Ok(Some(true)),
            "I" | "P" => Ok(Some(false)),
            "N" => Ok(None),
            other => Err(format!("'{other}' is none of C, I, P, N")),
        },
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Ok(Some(true)),
            Some(0.0) => Ok(Some(false)),
            _ => Err(format!("{n} is neither 1 nor 0")),
        },
        other => Err(format!("{other} is no success value")),
    }
}
