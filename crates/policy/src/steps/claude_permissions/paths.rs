//! Path rules of the file tools (`Read(…)`, `Edit(…)`), matched as Claude Code matches them:
//! gitignore patterns under a root.
//!
//! - `//etc/**` is rooted at `/`, `~/.ssh/**` at `home`, `/docs/**` at the settings file's
//!   root (the project for project and local settings and for inline rules, the settings
//!   file's directory otherwise).
//! - `./src/**` and `src/**` are relative to the project; a pattern with no `/` but a trailing
//!   one (`*.env`, `secrets`) matches at any depth, as in gitignore.
//! - `*` and `?` stay within one path segment, `**` crosses them, and a pattern that matches a
//!   directory matches everything below it.
//!
//! The call's path is made absolute against the project and `..` and `.` are removed before it
//! is matched, so `./src/../secrets/key` is `secrets/key`. Symbolic links are not followed: the
//! step does not read the file system.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// What a path pattern is relative to.
#[derive(Debug, Clone, PartialEq)]
pub enum Anchor {
    /// `//…`: the file system's root.
    Absolute,
    /// `~/…`: the user's home.
    Home,
    /// `/…`: a settings file's root.
    Root(String),
    /// `./…` or a bare pattern: the project directory.
    Project,
}

/// A path rule's content, compiled.
#[derive(Debug, Clone)]
pub struct PathPattern {
    anchor: Anchor,
    globs: GlobSet,
    careful: bool,
}

// === impl PathPattern ===

impl PathPattern {
    /// Reads a path rule; `root` is where `/…` patterns start (none: `/…` is project-relative).
    /// A pattern that refuses or asks (`careful`) ignores case, as Claude Code compares paths
    /// for those, and covers the directory whose contents it names (`secrets/**` covers
    /// `secrets`).
    pub fn parse(content: &str, root: Option<&str>, careful: bool) -> Result<PathPattern, String> {
        let content = collapse_slashes(content.trim());
        let (anchor, pattern, anchored) = if let Some(rest) = content.strip_prefix("//") {
            (Anchor::Absolute, rest.to_owned(), true)
        } else if let Some(rest) = content.strip_prefix("~/") {
            (Anchor::Home, rest.to_owned(), true)
        } else if let Some(rest) = content.strip_prefix('/') {
            (root.map_or(Anchor::Project, |root| Anchor::Root(normalize(root))), rest.to_owned(), true)
        } else {
            let rest = content.strip_prefix("./").unwrap_or(&content).to_owned();
            // gitignore: a slash before the end anchors the pattern.
            let anchored = rest.trim_end_matches('/').contains('/');
            (Anchor::Project, rest, anchored)
        };
        let pattern = pattern.trim_end_matches('/');
        if pattern.is_empty() {
            return Err(format!("'{content}' names no path"));
        }
        let base = if anchored { pattern.to_owned() } else { format!("**/{pattern}") };
        let mut set = GlobSetBuilder::new();
        let mut globs = vec![base.clone(), format!("{base}/**")];
        if careful && let Some(dir) = base.strip_suffix("/**") {
            globs.push(dir.to_owned());
        }
        for glob in globs {
            let glob = GlobBuilder::new(&glob)
                .literal_separator(true)
                .case_insensitive(careful)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("'{content}' is not a path pattern: {e}"))?;
            set.add(glob);
        }
        let globs = set.build().map_err(|e| format!("'{content}' is not a path pattern: {e}"))?;
        Ok(PathPattern { anchor, globs, careful })
    }

    /// What the pattern is relative to.
    pub fn anchor(&self) -> &Anchor {
        &self.anchor
    }

    /// Whether the pattern matches the absolute, normalized `path`.
    pub fn matches(&self, path: &str, project: Option<&str>, home: Option<&str>) -> bool {
        let root = match &self.anchor {
            Anchor::Absolute => "/",
            Anchor::Home => match home {
                Some(home) => home,
                None => return false,
            },
            Anchor::Root(root) => root.as_str(),
            Anchor::Project => match project {
                Some(project) => project,
                None => return false,
            },
        };
        relative(path, root, self.careful).is_some_and(|rel| !rel.is_empty() && self.globs.is_match(rel))
    }
}

/// `path` below `root`, without the leading slash; `None` outside it.
fn relative<'p>(path: &'p str, root: &str, ignore_case: bool) -> Option<&'p str> {
    if root == "/" {
        return path.strip_prefix('/');
    }
    let head = path.get(..root.len())?;
    let same = if ignore_case { head.eq_ignore_ascii_case(root) } else { head == root };
    if !same {
        return None;
    }
    let rest = &path[root.len()..];
    if rest.is_empty() { Some(rest) } else { rest.strip_prefix('/') }
}

/// The absolute, normalized form of a call's path: relative paths are read against
/// `project`, `~/` against `home`; `None` when the one needed is missing. No path at all is
/// the project itself (Glob and Grep search it by default).
pub fn absolute_path(path: Option<&str>, project: Option<&str>, home: Option<&str>) -> Option<String> {
    let path = match path {
        None | Some("") => return project.map(normalize),
        Some(path) => path,
    };
    if path.starts_with('/') {
        Some(normalize(path))
    } else if path == "~" || path.starts_with("~/") {
        Some(normalize(&format!("{}/{}", home?, &path[1..])))
    } else {
        Some(normalize(&format!("{}/{path}", project?)))
    }
}

/// `path` with `.`, `..` and repeated slashes resolved lexically (`..` at the root stays at
/// the root).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

fn collapse_slashes(text: &str) -> String {
    let leading = if text.starts_with("//") { "/" } else { "" };
    let mut out = String::from(leading);
    let mut slash = false;
    for c in text.chars() {
        if c == '/' && slash {
            continue;
        }
        slash = c == '/';
        out.push(c);
    }
    out
}

/// Directories whose files Claude Code asks about before editing, whatever its rules allow.
const PROTECTED_DIRS: &[&str] =
    &[".git", ".vscode", ".idea", ".claude", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn"];

/// Files Claude Code asks about before editing, whatever its rules allow.
#[rustfmt::skip]
const PROTECTED_FILES: &[&str] = &[
    ".gitconfig", ".gitmodules", ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile", ".zshenv",
    ".zlogin", ".zlogout", ".bash_login", ".bash_aliases", ".bash_logout", ".envrc", ".ripgreprc", ".mcp.json",
    ".claude.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnp.cjs", ".pnp.loader.mjs", ".pnp.js", ".pnp.data.json",
    ".pnpmfile.cjs", "bunfig.toml", ".bunfig.toml", ".bazelrc", ".bazelversion", ".bazeliskrc",
    ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml",
    "gradle-wrapper.properties", "maven-wrapper.properties", ".devcontainer.json", "pyrightconfig.json",
];

/// Whether Claude Code protects `path` from edits its rules allow (case-insensitive, as it
/// compares).
pub fn is_protected(path: &str) -> bool {
    let lower = path.to_lowercase();
    let parts: Vec<&str> = lower.split('/').filter(|p| !p.is_empty()).collect();
    let Some((file, dirs)) = parts.split_last() else { return false };
    dirs.iter().any(|dir| PROTECTED_DIRS.contains(dir))
        || PROTECTED_FILES.contains(file)
        || lower.contains("/.config/git/")
}
