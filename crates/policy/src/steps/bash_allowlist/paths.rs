//! `allowed_write_paths`: the files an approved line may create or change.
//!
//! Patterns are path globs (globset, `literal_separator` on): `*`, `?` and `[…]` stay within
//! one path component, `**` spans any number of them, `{a,b}` picks alternatives. A target is
//! compared as written, after removing `.` components and repeated or trailing slashes; a
//! target with a `..` component never matches, because the directory it climbs out of is not
//! known. Absolute targets are matched against absolute patterns only; relative targets
//! against relative patterns only, so `out/**` allows `> out/log.txt` in whatever directory
//! the line runs in (including one an earlier `cd` chose), and never `/tmp/out/log.txt`.
//! `/dev/null`, `/dev/stdout` and `/dev/stderr` always take contents written to them.
//!
//! A write is judged by [`How`] it touches its path: contents only, the name itself (created,
//! removed, renamed, linked or its metadata changed), the name with the directories above it
//! that may be missing (`mkdir -p`), the name and everything beneath it (recursive copies and
//! removals, what a link points to), or only what is beneath a directory (an extraction into
//! it). What is beneath a directory is allowed only by a pattern ending in `/**` whose prefix
//! matches the directory or one above it; `**` alone allows every relative path, including
//! what is beneath the working directory.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::steps::ParamError;

/// Targets every line may write to: they discard or pass through what is written.
const ALWAYS: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

/// Whether `target` is one of the paths through which bash itself opens a network connection
/// in a redirection (`/dev/tcp/HOST/PORT`, `/dev/udp/HOST/PORT`), written in any spelling
/// (`//dev/./tcp/…`).
pub(super) fn is_network(target: &str) -> bool {
    normalize(target).is_some_and(|path| path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/"))
}

/// How a write touches its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// The file's contents are written (it is created if missing): `/dev/null` may take them.
    Content,
    /// The name itself is created, removed, renamed, linked, or has its times, mode or owner
    /// changed: `/dev/null` may not, since that would replace or change the device.
    Entry,
    /// As [`How::Entry`], and every directory above it that is missing is created too, up to
    /// the directory an allowed pattern starts in.
    WithParents,
    /// The path and everything beneath it.
    Tree,
    /// Everything beneath the directory, which is not changed itself (an extraction into it).
    Beneath,
}

/// The compiled `allowed_write_paths` of one step.
#[derive(Debug, Clone)]
pub(super) struct WritePaths {
    /// The patterns as the policy wrote them.
    patterns: Vec<String>,
    absolute: GlobSet,
    relative: GlobSet,
    /// The prefixes of patterns ending in `/**`, absolute and relative: what is beneath a path
    /// they match, or beneath one below it, is allowed. Boxed, as rarely read, to keep the step small.
    trees: Box<(GlobSet, GlobSet)>,
    /// Whether `**` (every relative path) or `/**` (every absolute path) is a pattern.
    every_relative: bool,
    every_absolute: bool,
    /// The directory each pattern starts in: its text before the first glob character, up to
    /// the last `/`. `mkdir -p` may create these and their parents.
    roots: Vec<String>,
}

impl WritePaths {
    /// Compiles the patterns; `key` names the parameter in errors.
    pub(super) fn new(key: &str, patterns: Vec<String>) -> Result<Self, ParamError> {
        let mut absolute = GlobSetBuilder::new();
        let mut relative = GlobSetBuilder::new();
        let mut absolute_trees = GlobSetBuilder::new();
        let mut relative_trees = GlobSetBuilder::new();
        let (mut every_relative, mut every_absolute) = (false, false);
        let mut roots = Vec::new();
        for pattern in &patterns {
            let refuse = |why: &str| ParamError::at(key, format!("'{pattern}' {why}"));
            if pattern.starts_with('~') {
                return Err(refuse("starts with '~'; write the home directory's absolute path"));
            }
            let Some(normal) = normalize(pattern) else {
                return Err(refuse("is not a path pattern (it is empty or has a '..' component)"));
            };
            let compile = |text: &str| {
                GlobBuilder::new(text)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| refuse(&format!("is not a valid path glob: {e}")))
            };
            let glob = compile(&normal)?;
            let is_absolute = normal.starts_with('/');
            match normal.strip_suffix("/**") {
                Some("") => every_absolute = true,
                Some(prefix) => {
                    let prefix = compile(prefix)?;
                    if is_absolute {
                        absolute_trees.add(prefix)
                    } else {
                        relative_trees.add(prefix)
                    };
                }
                None if normal == "**" => every_relative = true,
                None => {}
            }
            let literal = normal.find(['*', '?', '[', '{', '\\']).map_or(normal.as_str(), |at| &normal[..at]);
            roots.push(literal.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned());
            if is_absolute {
                absolute.add(glob)
            } else {
                relative.add(glob)
            };
        }
        let build = |set: GlobSetBuilder| set.build().map_err(|e| ParamError::at(key, e.to_string()));
        Ok(WritePaths {
            patterns,
            absolute: build(absolute)?,
            relative: build(relative)?,
            trees: Box::new((build(absolute_trees)?, build(relative_trees)?)),
            every_relative,
            every_absolute,
            roots,
        })
    }

    /// The patterns as written in the policy.
    pub(super) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether a line may write to `target`, the certain text of a redirection target or of a
    /// file operand, in the way `how` says.
    pub(super) fn allows(&self, target: &str, how: How) -> bool {
        match how {
            How::Content => ALWAYS.contains(&target) || self.matches(target),
            How::Entry => self.matches(target),
            How::WithParents => self.matches(target) && self.parents_allowed(target),
            How::Tree => self.matches(target) && self.beneath(target),
            How::Beneath => self.beneath(target),
        }
    }

    fn matches(&self, target: &str) -> bool {
        match normalize(target) {
            Some(path) if path.starts_with('/') => self.absolute.is_match(&path),
            Some(path) => self.relative.is_match(&path),
            None => false,
        }
    }

    /// Whether every directory above `target` that `mkdir -p` may create is allowed, or is
    /// one a pattern starts in (or above it).
    fn parents_allowed(&self, target: &str) -> bool {
        let Some(path) = normalize(target) else { return false };
        let mut parent = path.as_str();
        while let Some((above, _)) = parent.rsplit_once('/') {
            parent = above;
            if parent.is_empty() {
                break;
            }
            let is_root =
                |root: &String| root == parent || root.strip_prefix(parent).is_some_and(|r| r.starts_with('/'));
            if !self.matches(parent) && !self.roots.iter().any(is_root) {
                return false;
            }
        }
        true
    }

    /// Whether everything beneath `dir` may be written (not `dir` itself). `.` is the working
    /// directory, allowed whole only by `**`.
    fn beneath(&self, dir: &str) -> bool {
        if dir.split('/').any(|part| part == "..") {
            return false;
        }
        let absolute = dir.starts_with('/');
        let (every, trees) =
            if absolute { (self.every_absolute, &self.trees.0) } else { (self.every_relative, &self.trees.1) };
        if every {
            return true;
        }
        let Some(path) = normalize(dir) else { return false };
        let mut at = path.as_str();
        loop {
            if trees.is_match(at) {
                return true;
            }
            match at.rsplit_once('/') {
                Some((above, _)) if !above.is_empty() => at = above,
                _ => return false,
            }
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
