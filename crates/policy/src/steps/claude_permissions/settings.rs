//! Claude Code settings files as a source of rules, resolved where a policy file is loaded.
//!
//! `settings` names one settings file or a list of them (a path is relative to the policy
//! file). Claude Code combines the `permissions.allow`, `ask` and `deny` of every source it
//! loads (managed, local, project, user, the command line), so the step takes the rules of
//! every file listed; their order does not matter. A file's `/…` rules are rooted where Claude
//! Code roots them: `<project>/.claude/settings.json` and `settings.local.json` at the project,
//! any other file (user settings in `~/.claude`, managed settings) at its own directory.
//! Managed settings' `allowManagedPermissionRulesOnly`, which makes Claude Code ignore every
//! other source, is refused rather than approximated.
//!
//! The engine reads no files: whoever loads a policy file calls [`resolve`] with a reader,
//! which replaces each path with the file's rules (`{path, root, permissions}`). The step
//! refuses a path that was not resolved, so a policy sent inline by a runner cannot make a
//! worker read a file of the worker's choosing.

use serde_json::{Map, Value, json};

use super::{Behavior, NAME, PROJECT, rule_texts};
use crate::document::{Document, PolicyError};
use crate::steps::{ParamError, Params, type_name};

/// The parameter naming settings files.
pub const SETTINGS: &str = "settings";

/// The rules of one resolved settings file.
#[derive(Debug, Clone)]
pub struct File {
    /// The file, for messages.
    pub path: String,
    /// Where its `/…` rules start.
    pub root: String,
    /// Its rules by behavior.
    pub rules: Vec<(Behavior, Vec<String>)>,
}

/// Reads the settings files of every `claude_permissions` step of `document` with `read`
/// (given a path as written, it returns the file's absolute path and text) and puts their
/// rules in place of the paths.
pub fn resolve(
    document: &mut Document,
    mut read: impl FnMut(&str) -> Result<(String, String), String>,
) -> Result<(), PolicyError> {
    let mut failures = Vec::new();
    for section in [&mut document.approvers, &mut document.reviewers].into_iter().flatten() {
        for entry in section.iter_mut().filter(|entry| entry.name == NAME) {
            let location = entry
                .param_locations
                .iter()
                .find(|(key, _)| key == SETTINGS)
                .map_or(entry.location, |(_, location)| *location);
            let project = entry.params.get(PROJECT).and_then(Value::as_str).map(super::paths::normalize);
            let paths: Vec<String> = match entry.params.get(SETTINGS) {
                Some(Value::String(path)) => vec![path.clone()],
                Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                    items.iter().filter_map(|item| item.as_str().map(str::to_owned)).collect()
                }
                _ => continue,
            };
            let mut resolved = Vec::new();
            for path in paths {
                match read(&path).and_then(|(absolute, text)| load(&path, &absolute, &text, project.as_deref())) {
                    Ok(file) => resolved.push(file),
                    Err(message) => {
                        failures.push((location, format!("step '{NAME}': settings file '{path}': {message}")));
                    }
                }
            }
            entry.params.insert(SETTINGS.to_owned(), Value::Array(resolved));
        }
    }
    match failures.into_iter().next() {
        Some((location, message)) => Err(document.error(location, message)),
        None => Ok(()),
    }
}

/// One settings file's rules, as the resolved parameter holds them: named as the policy names
/// it (messages never show where the loader keeps it), rooted by where it is.
fn load(written: &str, path: &str, text: &str, project: Option<&str>) -> Result<Value, String> {
    let settings: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if settings.get("allowManagedPermissionRulesOnly").is_some_and(|v| v == &Value::Bool(true)) {
        return Err("'allowManagedPermissionRulesOnly' is not supported: give only the managed settings".into());
    }
    let permissions = settings.get("permissions").cloned().unwrap_or(Value::Object(Map::new()));
    let path = super::paths::normalize(path);
    let dir = path.rsplit_once('/').map_or("/", |(dir, _)| if dir.is_empty() { "/" } else { dir }).to_owned();
    let in_project = |project: &str| {
        let claude = format!("{project}/.claude");
        dir == claude && (path.ends_with("/settings.json") || path.ends_with("/settings.local.json"))
    };
    let root = match project {
        Some(project) if in_project(project) => project.to_owned(),
        _ => dir,
    };
    Ok(json!({ "path": written, "root": root, "permissions": permissions }))
}

/// The resolved settings files of a step's parameters.
pub fn files(params: &Params) -> Result<Vec<File>, ParamError> {
    let items = match params.get(SETTINGS) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items.as_slice(),
        Some(Value::String(_)) => return Err(unresolved()),
        Some(other) => {
            return Err(ParamError::at(
                SETTINGS,
                format!("'{SETTINGS}' must be a path or a list of paths, not {}", type_name(other)),
            ));
        }
    };
    items
        .iter()
        .map(|item| {
            let Value::Object(file) = item else { return Err(unresolved()) };
            let text = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_owned);
            let (Some(path), Some(root)) = (text("path"), text("root")) else {
                return Err(ParamError::at(SETTINGS, format!("a resolved '{SETTINGS}' entry needs 'path' and 'root'")));
            };
            let permissions = file.get("permissions");
            let list = |key: &str| {
                rule_texts(permissions.and_then(|p| p.get(key)), &format!("{path}: permissions.{key}"))
                    .map_err(|e| ParamError::at(SETTINGS, e))
            };
            let rules =
                vec![(Behavior::Deny, list("deny")?), (Behavior::Ask, list("ask")?), (Behavior::Allow, list("allow")?)];
            Ok(File { path, root, rules })
        })
        .collect()
}

fn unresolved() -> ParamError {
    ParamError::at(
        SETTINGS,
        format!(
            "settings files are read only from a policy file loaded from disk (airlock policy, a worker's \
             --policy-dir); a policy sent inline cannot name files, so give its rules as '{}', '{}' and '{}'",
            "allow", "ask", "deny"
        ),
    )
}
