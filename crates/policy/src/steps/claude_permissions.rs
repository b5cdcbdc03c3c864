//! `claude_permissions`: decides as Claude Code's permission rules decide.
//!
//! The rules are Claude Code's own (`permissions.allow`, `ask` and `deny` of its settings
//! files), given inline as `allow`, `ask` and `deny`, or read from settings files named by
//! `settings` (see [`settings`]). As in Claude Code, the rules of every source are combined and
//! deny beats ask beats allow, whatever their order: a call a deny rule matches is rejected, one
//! an ask rule matches escalates, one an allow rule matches is approved, and one no rule matches
//! escalates, so the chain's next step decides where Claude Code would ask a person.
//!
//! The call is a Claude Code tool call: the tool's name (`Bash`, `Read`, `Edit`,
//! `mcp__github__create_issue`…) and its input as arguments. Rules:
//!
//! - `Tool` (or `Tool(*)`) matches every call of the tool; `mcp__server` and `mcp__server__*`
//!   every tool of an MCP server.
//! - `Bash(npm test)` matches that exact command, `Bash(git status:*)` the command and any
//!   command that continues it after a space, `Bash(git * main)` with `*` matching any text
//!   (see [`bash`]). A compound line is split by [`crate::shell`]: any part a deny rule
//!   matches rejects, and the line is approved only when every part is allowed.
//! - `Read(…)` and `Edit(…)` take gitignore-style paths (see [`paths`]): `Read` rules govern
//!   the reading tools (`Read`, `Glob`, `Grep`, `LS`, `NotebookRead`), `Edit` rules the editing
//!   ones (`Edit`, `MultiEdit`, `Write`, `NotebookEdit`). A relative file path is read against
//!   `project`, the directory Claude Code runs in (its hook input's `cwd`).
//! - `WebFetch(domain:example.com)` matches fetches of that host (`domain:*.example.com` its
//!   subdomains).
//!
//! Where Claude Code allows more than its rules say (read-only commands such as `ls`, reads
//! inside the working directory, permission modes such as `acceptEdits`), this step escalates:
//! it approves only what an allow rule covers. Where it cannot tell what Claude Code would do
//! (a line the shell reader refuses, an expansion, a write outside the project, a file Claude
//! Code protects such as `.git/` or `.bashrc`), it escalates instead of approving.

use std::fmt;

use serde_json::Value;

use super::{ParamError, Params, Subject, deny_unknown, opt_str, opt_str_list, type_name};
use crate::call::{Answer, Decision, Kind};

pub mod bash;
pub mod paths;
pub mod settings;

#[cfg(test)]
mod tests;

/// The step's name in a policy file.
pub const NAME: &str = "claude_permissions";

const ALLOW: &str = "allow";
const ASK: &str = "ask";
const DENY: &str = "deny";
const PROJECT: &str = "project";
const HOME: &str = "home";
pub use settings::SETTINGS;

/// What a rule answers when it matches, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Behavior {
    /// Claude Code refuses the call.
    Deny,
    /// Claude Code asks a person.
    Ask,
    /// Claude Code runs the call.
    Allow,
}

/// One permission rule, parsed.
#[derive(Debug, Clone)]
pub struct Rule {
    /// deny, ask or allow.
    pub behavior: Behavior,
    /// The rule as written, for explanations.
    pub text: String,
    /// The tool (or MCP server) it names.
    tool: String,
    /// What it says about the call's input, if anything.
    content: Content,
}

#[derive(Debug, Clone)]
enum Content {
    /// The whole tool.
    Any,
    /// A shell command pattern.
    Bash(bash::Pattern),
    /// A path pattern of a file tool.
    Path(paths::PathPattern),
    /// A host of `WebFetch(domain:…)`.
    Domain(String),
    /// Anything else (a `WebSearch(query)`, an `Agent(type)`…), which this step does not read.
    Other,
}

/// Decides Claude Code tool calls by Claude Code's permission rules.
#[derive(Debug, Clone)]
pub struct ClaudePermissions {
    rules: Vec<Rule>,
    project: Option<String>,
    home: Option<String>,
}

/// The tools `Read(…)` rules govern.
const READ_TOOLS: &[&str] = &["Read", "Glob", "Grep", "LS", "NotebookRead"];
/// The tools `Edit(…)` rules govern.
const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "Write", "NotebookEdit"];

// === impl ClaudePermissions ===

impl ClaudePermissions {
    /// Reads `allow`, `ask` and `deny` (lists of rules), `settings` (settings files, resolved
    /// where the policy file was read; see [`settings::resolve`]), `project` (the absolute
    /// directory Claude Code runs in) and `home` (the user's home, for `~/` rules).
    pub fn from_params(params: &Params) -> Result<Self, ParamError> {
        deny_unknown(NAME, params, &[ALLOW, ASK, DENY, SETTINGS, PROJECT, HOME])?;
        let project = absolute(params, PROJECT)?;
        let home = absolute(params, HOME)?;
        let mut rules = Vec::new();
        // Inline rules are rooted like Claude Code's command-line rules: at the project.
        for (key, behavior) in [(DENY, Behavior::Deny), (ASK, Behavior::Ask), (ALLOW, Behavior::Allow)] {
            for text in opt_str_list(params, key)?.unwrap_or_default() {
                rules.push(Rule::parse(&text, behavior, project.as_deref()).map_err(|e| ParamError::at(key, e))?);
            }
        }
        for file in settings::files(params)? {
            for (behavior, texts) in file.rules {
                for text in texts {
                    let rule = Rule::parse(&text, behavior, Some(&file.root))
                        .map_err(|e| ParamError::at(SETTINGS, format!("{}: {e}", file.path)))?;
                    rules.push(rule);
                }
            }
        }
        if rules.is_empty() {
            return Err(ParamError::at(
                ALLOW,
                format!("'{NAME}' needs rules: '{ALLOW}', '{ASK}', '{DENY}' or '{SETTINGS}'"),
            ));
        }
        for rule in &rules {
            if let Content::Path(pattern) = &rule.content {
                let needs = match pattern.anchor() {
                    paths::Anchor::Project => project.is_none().then_some(PROJECT),
                    paths::Anchor::Home => home.is_none().then_some(HOME),
                    _ => None,
                };
                if let Some(key) = needs {
                    return Err(ParamError::at(
                        key,
                        format!(
                            "the rule '{}' is relative to '{key}', which the step needs as an absolute path",
                            rule.text
                        ),
                    ));
                }
            }
        }
        rules.sort_by_key(|rule| rule.behavior);
        Ok(ClaudePermissions { rules, project, home })
    }

    /// Rejects what a deny rule matches, escalates what an ask rule or no rule matches, and
    /// approves what allow rules cover. In a review chain approval reads as `continue` and
    /// rejection as `terminate`.
    pub fn decide(&self, subject: &Subject<'_>) -> Answer {
        let (approve, reject) = match subject.kind {
            Kind::Approval => (Decision::Approve, Decision::Reject),
            Kind::Review => (Decision::Continue, Decision::Terminate),
        };
        match self.verdict(&subject.call.function, &subject.call.arguments) {
            Verdict::Deny(why) => Answer::new(reject, why),
            Verdict::Allow(why) => Answer::new(approve, why),
            Verdict::Escalate(why) => Answer::escalate(why),
        }
    }

    /// What Claude Code's rules make of a call of `tool` with `input`.
    fn verdict(&self, tool: &str, input: &serde_json::Map<String, Value>) -> Verdict {
        // A deny rule for the whole tool decides before anything about the input.
        let whole_deny = |rule: &Rule| {
            rule.behavior == Behavior::Deny && matches!(rule.content, Content::Any) && names_tool(&rule.tool, tool)
        };
        if let Some(rule) = self.first(whole_deny) {
            return rule_verdict(rule, tool);
        }
        if tool == "Bash" {
            return self.bash(input);
        }
        if READ_TOOLS.contains(&tool) || EDIT_TOOLS.contains(&tool) {
            return self.file(tool, input);
        }
        if tool == "WebFetch" {
            return self.fetch(input);
        }
        self.by_tool_only(tool)
    }

    /// The strongest rule `pick` selects (rules are sorted deny, ask, allow).
    fn first(&self, pick: impl Fn(&Rule) -> bool) -> Option<&Rule> {
        self.rules.iter().find(|rule| pick(rule))
    }

    /// Any other tool, decided by whole-tool rules; a rule about its input (which this step
    /// does not read) that denies or asks escalates.
    fn by_tool_only(&self, tool: &str) -> Verdict {
        let whole = self.first(|rule| matches!(rule.content, Content::Any) && names_tool(&rule.tool, tool));
        if let Some(rule) = whole.filter(|rule| rule.behavior == Behavior::Deny) {
            return rule_verdict(rule, tool);
        }
        let about_input = |rule: &Rule| {
            rule.tool == tool && matches!(rule.content, Content::Other) && rule.behavior != Behavior::Allow
        };
        if let Some(rule) = self.first(about_input) {
            return Verdict::Escalate(format!(
                "Claude Code's rule '{}' is about {tool}'s input, which this step does not read.",
                rule.text
            ));
        }
        match whole {
            Some(rule) => rule_verdict(rule, tool),
            None => Verdict::Escalate(format!("No Claude Code rule covers {tool}.")),
        }
    }

    fn bash(&self, input: &serde_json::Map<String, Value>) -> Verdict {
        let Some(line) = input.get("command").and_then(Value::as_str) else {
            return Verdict::Escalate("The Bash call has no 'command'.".into());
        };
        // What Claude Code checks a command's paths against, as it does for the file tools.
        let denied_path = |path: &str, access: bash::Access| match access {
            bash::Access::Read => self.path_rule(path, false, Behavior::Deny),
            bash::Access::Write => {
                self.path_rule(path, true, Behavior::Deny).or_else(|| self.path_rule(path, false, Behavior::Deny))
            }
            bash::Access::Redirect => self.path_rule(path, true, Behavior::Deny),
        };
        let rules = bash::Rules {
            patterns: self
                .rules
                .iter()
                .filter_map(|rule| match &rule.content {
                    Content::Bash(pattern) => Some((rule, pattern)),
                    _ => None,
                })
                .collect(),
            whole: self.first(|rule| matches!(rule.content, Content::Any) && rule.tool == "Bash"),
            denied_path: &denied_path,
            project: self.project.as_deref(),
            home: self.home.as_deref(),
        };
        bash::decide(line, &rules)
    }

    /// The strongest path rule of `behavior` of the editing (or reading) tools that covers
    /// `path`.
    fn path_rule(&self, path: &str, editing: bool, behavior: Behavior) -> Option<&Rule> {
        let family: &[&str] = if editing { EDIT_TOOLS } else { READ_TOOLS };
        self.first(|rule| {
            rule.behavior == behavior
                && family.contains(&rule.tool.as_str())
                && matches!(&rule.content, Content::Path(p) if p.matches(path, self.project.as_deref(), self.home.as_deref()))
        })
    }

    fn file(&self, tool: &str, input: &serde_json::Map<String, Value>) -> Verdict {
        let editing = EDIT_TOOLS.contains(&tool);
        let key = match tool {
            "NotebookEdit" | "NotebookRead" => "notebook_path",
            "Glob" | "Grep" | "LS" => "path",
            _ => "file_path",
        };
        let written = match input.get(key) {
            Some(Value::String(path)) => Some(path.as_str()),
            None | Some(Value::Null) if matches!(tool, "Glob" | "Grep") => None,
            _ => return Verdict::Escalate(format!("The {tool} call has no '{key}' this step can read.")),
        };
        let Some(path) = paths::absolute_path(written, self.project.as_deref(), self.home.as_deref()) else {
            return Verdict::Escalate(format!(
                "The {tool} call's path is relative and the step has no '{PROJECT}' or '{HOME}' to read it against."
            ));
        };
        let family = if editing { "Edit" } else { "Read" };
        let applies = |rule: &Rule| -> bool {
            match &rule.content {
                Content::Any => rule.tool == tool,
                Content::Path(pattern) => {
                    let governs = rule.tool == family || rule.tool == tool;
                    governs && pattern.matches(&path, self.project.as_deref(), self.home.as_deref())
                }
                _ => false,
            }
        };
        // A file a Read deny rule covers cannot be written either.
        if editing && let Some(rule) = self.path_rule(&path, false, Behavior::Deny) {
            return rule_verdict(rule, &format!("{tool} of {path}"));
        }
        match self.first(applies) {
            Some(rule) if rule.behavior == Behavior::Allow && editing && paths::is_protected(&path) => {
                Verdict::Escalate(format!(
                    "Claude Code asks before editing {path}, a file it protects, whatever its rules allow."
                ))
            }
            Some(rule) => rule_verdict(rule, &format!("{tool} of {path}")),
            None => Verdict::Escalate(format!("No Claude Code rule covers {tool} of {path}.")),
        }
    }

    fn fetch(&self, input: &serde_json::Map<String, Value>) -> Verdict {
        let Some(host) = input.get("url").and_then(Value::as_str).and_then(host_of) else {
            return Verdict::Escalate("The WebFetch call has no URL whose host this step can read.".into());
        };
        let applies = |rule: &Rule| match &rule.content {
            Content::Any => rule.tool == "WebFetch",
            Content::Domain(domain) => rule.tool == "WebFetch" && domain_matches(domain, &host),
            _ => false,
        };
        match self.first(applies) {
            Some(rule) => rule_verdict(rule, &format!("WebFetch of {host}")),
            None => Verdict::Escalate(format!("No Claude Code rule covers WebFetch of {host}.")),
        }
    }
}

impl fmt::Display for ClaudePermissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |b| self.rules.iter().filter(|rule| rule.behavior == b).count();
        write!(
            f,
            "{NAME} ({} deny, {} ask, {} allow",
            count(Behavior::Deny),
            count(Behavior::Ask),
            count(Behavior::Allow)
        )?;
        if let Some(project) = &self.project {
            write!(f, "; project: {project}")?;
        }
        f.write_str(")")
    }
}

/// A step's conclusion before it becomes an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Reject, with why.
    Deny(String),
    /// Escalate, with why.
    Escalate(String),
    /// Approve, with why.
    Allow(String),
}

/// The verdict of the one rule that decides about `what`.
fn rule_verdict(rule: &Rule, what: &str) -> Verdict {
    match rule.behavior {
        Behavior::Deny => Verdict::Deny(format!("Claude Code's rule '{}' denies {what}.", rule.text)),
        Behavior::Ask => Verdict::Escalate(format!("Claude Code's rule '{}' asks before {what}.", rule.text)),
        Behavior::Allow => Verdict::Allow(format!("Claude Code's rule '{}' allows {what}.", rule.text)),
    }
}

// === impl Rule ===

impl Rule {
    /// Parses `Tool` or `Tool(content)`; path rules starting with `/` are rooted at `root`.
    pub fn parse(text: &str, behavior: Behavior, root: Option<&str>) -> Result<Rule, String> {
        let trimmed = text.trim();
        let (tool, content) = match trimmed.find('(') {
            None => (trimmed, None),
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(format!("'{text}' is not a permission rule (Tool or Tool(content))"));
                };
                (&trimmed[..open], Some(inner.replace("\\(", "(").replace("\\)", ")")))
            }
        };
        if tool.is_empty() || !tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '*') {
            return Err(format!("'{text}' does not start with a tool name"));
        }
        let tool = tool.strip_suffix("__*").unwrap_or(tool).to_owned();
        let content = match content.as_deref() {
            None | Some("") | Some("*") => Content::Any,
            Some(inner) if tool == "Bash" => Content::Bash(bash::Pattern::parse(inner)),
            Some(inner) if READ_TOOLS.contains(&tool.as_str()) || EDIT_TOOLS.contains(&tool.as_str()) => {
                Content::Path(paths::PathPattern::parse(inner, root, behavior != Behavior::Allow)?)
            }
            Some(inner) if tool == "WebFetch" => match inner.strip_prefix("domain:") {
                Some(domain) if !domain.is_empty() => Content::Domain(domain.to_ascii_lowercase()),
                _ => return Err(format!("'{text}': WebFetch rules take 'domain:host'")),
            },
            Some(_) => Content::Other,
        };
        Ok(Rule { behavior, text: trimmed.to_owned(), tool, content })
    }
}

// === helpers ===

/// Whether a whole-tool rule for `rule_tool` covers calls of `tool`: the same name, or an
/// MCP server (`mcp__server`) and one of its tools.
fn names_tool(rule_tool: &str, tool: &str) -> bool {
    rule_tool == tool
        || (rule_tool.starts_with("mcp__")
            && !rule_tool["mcp__".len()..].contains("__")
            && tool.strip_prefix(rule_tool).is_some_and(|rest| rest.starts_with("__")))
}

/// An absolute path parameter, if given.
fn absolute(params: &Params, key: &str) -> Result<Option<String>, ParamError> {
    match opt_str(params, key)? {
        None => Ok(None),
        Some(path) if path.starts_with('/') => Ok(Some(paths::normalize(path))),
        Some(path) => Err(ParamError::at(key, format!("'{key}' must be an absolute path, not '{path}'"))),
    }
}

/// The lower-case host of an `http(s)` URL.
fn host_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let authority = &rest[..rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host =
        if host_port.starts_with('[') { &host_port[..=host_port.find(']')?] } else { host_port.split(':').next()? };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty() && !host.contains('*')).then_some(host)
}

/// Whether `domain:` of a rule matches `host`: the same host, or with `*.` any subdomain.
fn domain_matches(domain: &str, host: &str) -> bool {
    match domain.strip_prefix("*.") {
        Some(parent) => host.strip_suffix(parent).is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
        None => domain == host,
    }
}

/// Reads a list of rule strings from a settings value (used by [`settings`]).
fn rule_texts(value: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| format!("{what} must list strings")))
            .collect(),
        Some(other) => Err(format!("{what} must be a list, not {}", type_name(other))),
    }
}
