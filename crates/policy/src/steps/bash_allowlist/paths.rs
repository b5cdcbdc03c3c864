//! `allowed_write_paths`: the files an approved line may create or change.
//!
//! Patterns are path globs (globset, `literal_separator` on): `*`, `?` and `[…]` stay within
//! one path component, `**` spans any number of them, `{a,b}` picks alternatives. A target is
//! compared as written, after removing `.` components and repeated or trailing slashes; a
//! target with a `..` component never matches, because the directory it climbs out of is not
//! known. Absolute targets are matched against absolute patterns only; relative targets
//! against relative patterns only, so `out/**` allows `> out/log.txt` in whatever directory
//! the line runs in (including one an earlier `cd` chose), and never `/tmp/out/log.txt`.
//! `/dev/null`, `/dev/stdout` and `/dev/stderr` are always allowed.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::steps::ParamError;

/// Targets every line may write to: they discard or pass through what is written.
const ALWAYS: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

/// The compiled `allowed_write_paths` of one step.
#[derive(Debug, Clone)]
pub(super) struct WritePaths {
    /// The patterns as the policy wrote them.
    patterns: Vec<String>,
    absolute: GlobSet,
    relative: GlobSet,
}

impl WritePaths {
    /// Compiles the patterns; `key` names the parameter in errors.
    pub(super) fn new(key: &str, patterns: Vec<String>) -> Result<Self, ParamError> {
        let mut absolute = GlobSetBuilder::new();
        let mut relative = GlobSetBuilder::new();
        for pattern in &patterns {
            let refuse = |why: &str| ParamError::at(key, format!("'{pattern}' {why}"));
            if pattern.starts_with('~') {
                return Err(refuse("starts with '~'; write the home directory's absolute path"));
            }
            let Some(normal) = normalize(pattern) else {
                return Err(refuse("is not a path pattern (it is empty or has a '..' component)"));
            };
            let glob = GlobBuilder::new(&normal)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| refuse(&format!("is not a valid path glob: {e}")))?;
            if normal.starts_with('/') {
                absolute.add(glob)
            } else {
                relative.add(glob)
            };
        }
        let build = |set: GlobSetBuilder| set.build().map_err(|e| ParamError::at(key, e.to_string()));
        Ok(WritePaths { patterns, absolute: build(absolute)?, relative: build(relative)? })
    }

    /// The patterns as written in the policy.
    pub(super) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether a line may write to `target`, the certain text of a redirection target or of a
    /// file operand.
    pub(super) fn allows(&self, target: &str) -> bool {
        if ALWAYS.contains(&target) {
            return true;
        }
        match normalize(target) {
            Some(path) if path.starts_with('/') => self.absolute.is_match(&path),
            Some(path) => self.relative.is_match(&path),
            None => false,
        }
    }
}

/// `path` without `.` components and repeated or trailing slashes; `None` when it is empty,
/// names only the current or root directory, or has a `..` component.
fn normalize(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return None;
    }
    let joined = parts.join("/");
    Some(if path.starts_with('/') { format!("/{joined}") } else { joined })
}
