//! `Bash(…)` rules, and a shell line decided by them.
//!
//! As Claude Code reads them: content ending in `:*` is a prefix (`git status:*` matches
//! `git status` and `git status --short`, not `git statusx`); content with an unescaped `*` is
//! a wildcard pattern whose `*` matches any text (a single trailing ` *` also matches nothing,
//! so `git *` matches `git`); anything else is an exact command. Runs of blanks in the command
//! count as one space.
//!
//! A line is split into its simple commands by [`crate::shell`], which also finds commands
//! inside subshells, groups and `$(…)`. A deny or ask rule is tried on each command as written,
//! without its leading `NAME=value` assignments, and without the wrappers Claude Code looks
//! through (`timeout 5`, `nice -n 5`, `nohup`, `time`, `stdbuf -oL`, `command`, `builtin`,
//! `noglob`, `xargs`), so a wrapper does not hide a denied command. An allow rule must match a
//! command as written, and the line is approved only if every command is allowed and the line
//! holds nothing whose effect the rules do not show: an expansion or substitution, a
//! redirection that writes a file, an argument naming a path outside the project.

use std::sync::LazyLock;

use regex::Regex;

use super::{Behavior, Rule, Verdict};
use crate::shell::{self, SimpleCommand};

/// The content of a `Bash(…)` rule.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// `Bash(npm test)`.
    Exact(String),
    /// `Bash(git status:*)`, holding `git status`.
    Prefix(String),
    /// `Bash(git * main)`, compiled.
    Wildcard(Regex),
}

/// Wrappers Claude Code removes before it matches a rule: each regular expression eats one.
const WRAPPERS: &[&str] = &[
    r"^timeout[ \t]+(?:(?:--(?:foreground|preserve-status|verbose)|--(?:kill-after|signal)=[A-Za-z0-9_.+-]+|--(?:kill-after|signal)[ \t]+[A-Za-z0-9_.+-]+|-v|-[ks][ \t]+[A-Za-z0-9_.+-]+|-[ks][A-Za-z0-9_.+-]+)[ \t]+)*(?:--[ \t]+)?\d+(?:\.\d+)?[smhd]?[ \t]+",
    r"^time[ \t]+(?:--[ \t]+)?",
    r"^nice(?:[ \t]+-n[ \t]+-?\d+|[ \t]+-\d+)?[ \t]+(?:--[ \t]+)?",
    r"^stdbuf(?:[ \t]+-[ioe][LN0-9]+)+[ \t]+(?:--[ \t]+)?",
    r"^nohup[ \t]+(?:--[ \t]+)?",
    r"^command(?:[ \t]+-p+)*(?:[ \t]+--)?[ \t]+",
    r"^builtin(?:[ \t]+--)?[ \t]+",
    r"^noglob[ \t]+",
    r"^xargs(?:[ \t]+-[A-Za-z0-9]+)*[ \t]+",
    r"^exec(?:[ \t]+-[acl]+)*[ \t]+",
    r"^env(?:[ \t]+(?:-[iu0][ \t]+[A-Za-z_][A-Za-z0-9_]*|-[i0]|--|[A-Za-z_][A-Za-z0-9_]*=[^ \t]*))*[ \t]+",
];

/// [`WRAPPERS`], compiled once.
fn wrappers() -> &'static [Regex] {
    static COMPILED: LazyLock<Vec<Regex>> =
        LazyLock::new(|| WRAPPERS.iter().map(|source| Regex::new(source).expect("a valid expression")).collect());
    &COMPILED
}

// === impl Pattern ===

impl Pattern {
    /// Reads the content of a `Bash(…)` rule.
    pub fn parse(content: &str) -> Pattern {
        let content = content.trim();
        if let Some(prefix) = content.strip_suffix(":*") {
            return Pattern::Prefix(collapse(prefix.trim_end()));
        }
        if has_unescaped_star(content) {
            return Pattern::Wildcard(wildcard(content));
        }
        Pattern::Exact(content.to_owned())
    }

    /// Whether the pattern matches one command's text.
    pub fn matches(&self, command: &str) -> bool {
        let command = collapse(command.trim());
        match self {
            Pattern::Exact(exact) => collapse(exact) == command,
            Pattern::Prefix(prefix) => {
                command == *prefix || command.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.starts_with(' '))
            }
            Pattern::Wildcard(regex) => regex.is_match(&command),
        }
    }
}

/// What a Bash line is decided against.
pub struct Rules<'r> {
    /// The `Bash(…)` rules, deny first.
    pub patterns: Vec<(&'r Rule, &'r Pattern)>,
    /// The strongest rule for the whole Bash tool, if any.
    pub whole: Option<&'r Rule>,
    /// The deny rule of the file tools that covers an absolute path, if one does.
    pub denied_path: &'r dyn Fn(&str, Access) -> Option<&'r Rule>,
    /// The project directory.
    pub project: Option<&'r str>,
    /// The user's home.
    pub home: Option<&'r str>,
}

/// Decides a command line by `rules`.
pub fn decide(line: &str, rules: &Rules<'_>) -> Verdict {
    let patterns = &rules.patterns;
    let trimmed = line.trim();
    // An exact rule is tried on the whole line first, as Claude Code does.
    if let Some((rule, _)) = patterns.iter().find(|(_, p)| matches!(p, Pattern::Exact(e) if e == trimmed)) {
        return super::rule_verdict(rule, &format!("'{trimmed}'"));
    }
    let parse = shell::parse(line);
    let commands: Vec<(String, Vec<String>)> =
        parse.commands.iter().map(|command| (command.to_string(), looser_forms(command))).collect();
    // Deny anywhere decides, even in a line that cannot be read to its end: the commands read
    // before the error, and the line's fragments between operators and keywords.
    let fragments = if parse.error.is_some() { fragments(line) } else { Vec::new() };
    for (rule, pattern) in patterns.iter().filter(|(rule, _)| rule.behavior == Behavior::Deny) {
        let command = commands.iter().find(|(_, forms)| forms.iter().any(|form| pattern.matches(form)));
        if let Some((text, _)) = command {
            return super::rule_verdict(rule, &format!("'{text}'"));
        }
        if let Some(fragment) = fragments.iter().find(|fragment| pattern.matches(fragment)) {
            return super::rule_verdict(rule, &format!("'{fragment}'"));
        }
    }
    if let Some(verdict) = parse.commands.iter().find_map(|command| denied_path(command, rules)) {
        return verdict;
    }
    if let Some(error) = parse.error {
        return Verdict::Escalate(format!("Cannot tell for certain which commands the line runs: {error}."));
    }
    if commands.is_empty() {
        return Verdict::Escalate("The command line is empty.".into());
    }
    for (rule, pattern) in patterns.iter().filter(|(rule, _)| rule.behavior == Behavior::Ask) {
        if let Some((text, _)) = commands.iter().find(|(_, forms)| forms.iter().any(|form| pattern.matches(form))) {
            return super::rule_verdict(rule, &format!("'{text}'"));
        }
    }
    if let Some(rule) = rules.whole.filter(|rule| rule.behavior != Behavior::Allow) {
        return super::rule_verdict(rule, "Bash");
    }
    if let Some(why) = structure(line) {
        return Verdict::Escalate(why);
    }
    let mut allowed_by = Vec::new();
    for (command, (text, _)) in parse.commands.iter().zip(&commands) {
        if let Some(why) = unclear(command, rules.project) {
            return Verdict::Escalate(format!("'{text}': {why}"));
        }
        let written = unquoted(command);
        let rule = patterns
            .iter()
            .find(|(rule, pattern)| {
                rule.behavior == Behavior::Allow
                    && match pattern {
                        // An exact rule matches only text the line holds as written.
                        Pattern::Exact(exact) => trimmed.contains(exact.as_str()) && pattern.matches(text),
                        _ => pattern.matches(text) || written.as_deref().is_some_and(|w| pattern.matches(w)),
                    }
            })
            .map(|(rule, _)| *rule)
            .or(rules.whole);
        match rule {
            Some(rule) if !allowed_by.contains(&rule.text.as_str()) => allowed_by.push(rule.text.as_str()),
            Some(_) => {}
            None => return Verdict::Escalate(format!("No Claude Code rule allows '{text}'.")),
        }
    }
    Verdict::Allow(format!("Claude Code's rules allow every command of the line ({}).", allowed_by.join(", ")))
}

/// The words of a command after quote removal, when every one is certain.
fn unquoted(command: &SimpleCommand) -> Option<String> {
    let words: Option<Vec<&str>> = command.words.iter().map(|word| word.literal()).collect();
    words.map(|words| words.join(" "))
}

/// The commands whose arguments Claude Code reads as paths, and how each uses them (as
/// Claude Code lists them; `git` is left out, whose paths Claude Code reads only in some
/// subcommands).
#[rustfmt::skip]
const PATH_COMMANDS: &[(&str, Access)] = &[
    ("cd", Access::Read), ("ls", Access::Read), ("find", Access::Read), ("mkdir", Access::Write),
    ("touch", Access::Write), ("rm", Access::Write), ("rmdir", Access::Write), ("mv", Access::Write),
    ("cp", Access::Write), ("cat", Access::Read), ("head", Access::Read), ("tail", Access::Read),
    ("sort", Access::Read), ("uniq", Access::Read), ("wc", Access::Read), ("cut", Access::Read),
    ("paste", Access::Read), ("column", Access::Read), ("tr", Access::Read), ("file", Access::Read),
    ("stat", Access::Read), ("diff", Access::Read), ("awk", Access::Read), ("gawk", Access::Read),
    ("mawk", Access::Read), ("nawk", Access::Read), ("strings", Access::Read), ("hexdump", Access::Read),
    ("od", Access::Read), ("base64", Access::Read), ("nl", Access::Read), ("tac", Access::Read),
    ("man", Access::Read), ("rev", Access::Read), ("fold", Access::Read), ("expand", Access::Read),
    ("unexpand", Access::Read), ("fmt", Access::Read), ("comm", Access::Read), ("cmp", Access::Read),
    ("pr", Access::Read), ("numfmt", Access::Read), ("tsort", Access::Read), ("grep", Access::Read),
    ("egrep", Access::Read), ("fgrep", Access::Read), ("rg", Access::Read), ("sed", Access::Write),
    ("jq", Access::Read), ("sha256sum", Access::Read), ("sha1sum", Access::Read), ("md5sum", Access::Read),
    ("tee", Access::Write),
];

/// Commands whose first argument that is not an option is a pattern or a script, not a path.
const PATTERN_FIRST: &[&str] = &["grep", "egrep", "fgrep", "rg", "sed", "awk", "gawk", "mawk", "nawk", "jq"];

/// How a command uses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads it: Read deny rules apply.
    Read,
    /// Writes it (and may read it, as `cp` and `sed -i` do): Edit and Read deny rules apply.
    Write,
    /// Writes it through a redirection: Edit deny rules apply.
    Redirect,
}

/// A deny rule of the file tools that covers a path the command names: an argument of a
/// command Claude Code reads paths of, or a redirection's file.
fn denied_path(command: &SimpleCommand, rules: &Rules<'_>) -> Option<Verdict> {
    let text = |word: &'_ shell::Word| word.literal().unwrap_or(&word.raw).to_owned();
    let mut named: Vec<(String, Access)> = Vec::new();
    let name = command.name().map(text).map(|name| name.rsplit('/').next().unwrap_or_default().to_owned());
    if let Some((command_name, access)) = name.as_deref().and_then(|n| PATH_COMMANDS.iter().find(|(c, _)| *c == n)) {
        let mut pattern_pending = PATTERN_FIRST.contains(command_name);
        for word in command.args() {
            let value = text(word);
            if value.starts_with('-') || value.is_empty() {
                continue;
            }
            if std::mem::take(&mut pattern_pending) {
                continue;
            }
            named.push((value, *access));
        }
    }
    for redirection in &command.redirections {
        // A file written through a redirection answers to Edit rules only, as in Claude Code.
        let access = if redirection.written().is_some() { Access::Redirect } else { Access::Read };
        if redirection.op != "<<<" {
            named.push((text(&redirection.target), access));
        }
    }
    for (value, access) in named {
        let Some(path) = super::paths::absolute_path(Some(&value), rules.project, rules.home) else { continue };
        if let Some(rule) = (rules.denied_path)(&path, access) {
            return Some(super::rule_verdict(rule, &format!("'{command}', which names {path}")));
        }
    }
    None
}

/// Why the line's shape keeps it from approval: subshells, groups and background jobs, which
/// Claude Code asks about whatever its rules allow.
fn structure(line: &str) -> Option<String> {
    let mut quote = None;
    let mut chars = line.chars().peekable();
    let mut previous = ' ';
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                chars.next();
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | ')' | '{' | '}') => {
                return Some(format!(
                    "the line holds '{c}' (a subshell, group or substitution), which Claude Code asks about."
                ));
            }
            (None, '&') if !matches!(previous, '&' | '>' | '<') && !matches!(chars.peek(), Some('&' | '>')) => {
                return Some("the line runs a command in the background ('&'), which Claude Code asks about.".into());
            }
            _ => {}
        }
        previous = c;
    }
    None
}

/// The text between a line's operators, without leading keywords: where a denied command may
/// stand in a line the shell reader refuses (`if …; then rm -rf x; fi`).
fn fragments(line: &str) -> Vec<String> {
    const KEYWORDS: &[&str] = &["if", "then", "else", "elif", "do", "while", "until", "!", "time", "{", "}"];
    let mut forms = Vec::new();
    for fragment in line.split([';', '&', '|', '\n', '(', ')', '`']) {
        let mut words: Vec<&str> = fragment.split_whitespace().collect();
        while words.first().is_some_and(|word| KEYWORDS.contains(word) || *word == "$") {
            words.remove(0);
        }
        let fragment = words.join(" ");
        let fragment = fragment.trim_start_matches('$');
        if !fragment.is_empty() {
            strip_wrappers(fragment, &mut forms);
        }
    }
    forms
}

/// The forms of a command a deny or ask rule is tried on: as written, without its
/// assignments, without quotes, with the command word's directory removed (`/bin/rm` is
/// `rm`), and without the wrappers Claude Code looks through.
fn looser_forms(command: &SimpleCommand) -> Vec<String> {
    let written = command.to_string();
    let words = command.words.iter().map(|w| w.raw.as_str()).collect::<Vec<_>>().join(" ");
    let texts: Vec<&str> = command.words.iter().map(|w| w.literal().unwrap_or(&w.raw)).collect();
    let unquoted = texts.join(" ");
    let mut forms = vec![written];
    for form in [words, unquoted] {
        strip_wrappers(&form, &mut forms);
    }
    if let Some((first, rest)) = texts.split_first()
        && let Some((_, base)) = first.rsplit_once('/')
    {
        let mut words = vec![base];
        words.extend_from_slice(rest);
        strip_wrappers(&words.join(" "), &mut forms);
    }
    forms
}

/// Adds `form` and what remains of it as each leading wrapper is removed.
fn strip_wrappers(form: &str, forms: &mut Vec<String>) {
    let mut current = form.to_owned();
    loop {
        if !forms.contains(&current) {
            forms.push(current.clone());
        }
        let stripped = wrappers().iter().fold(current.clone(), |text, wrapper| wrapper.replace(&text, "").into_owned());
        if stripped == current || stripped.is_empty() {
            break;
        }
        current = stripped;
    }
}

/// Why an allowed command may still do what its rule does not show, if it may.
fn unclear(command: &SimpleCommand, project: Option<&str>) -> Option<String> {
    if command.words.is_empty() {
        return Some("it runs no command of its own (only assignments or redirections).".into());
    }
    if !command.assignments.is_empty() {
        return Some("it sets variables, which can change what the command runs.".into());
    }
    for redirection in &command.redirections {
        if let Some(target) = redirection.written()
            && target.literal() != Some("/dev/null")
        {
            return Some(format!("it writes to '{target}' through a redirection."));
        }
    }
    for word in &command.words {
        let raw = word.raw.as_str();
        let text = match word.literal() {
            Some(text) => text,
            None if raw.contains(['$', '`']) || raw.contains("<(") || raw.contains(">(") => {
                return Some(format!("'{raw}' is expanded by the shell, so its text is not certain."));
            }
            None => raw,
        };
        if looks_like_path(text)
            && !super::paths::absolute_path(Some(text), project, None).is_some_and(|p| inside(&p, project))
        {
            return Some(format!("'{raw}' may name a file outside the project."));
        }
    }
    None
}

/// A word that names a path Claude Code checks against the project: absolute, from home, or
/// climbing out with `..`.
fn looks_like_path(text: &str) -> bool {
    let value = text.split_once('=').map_or(text, |(_, v)| v);
    value.starts_with('/') || value.starts_with('~') || value.split('/').any(|part| part == "..")
}

fn inside(path: &str, project: Option<&str>) -> bool {
    project.is_some_and(|project| path == project || path.strip_prefix(project).is_some_and(|r| r.starts_with('/')))
}

/// `text` with every run of blanks as one space.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for c in text.chars() {
        if c == ' ' || c == '\t' {
            if !blank {
                out.push(' ');
            }
            blank = true;
        } else {
            out.push(c);
            blank = false;
        }
    }
    out
}

fn has_unescaped_star(text: &str) -> bool {
    let bytes = text.as_bytes();
    (0..bytes.len())
        .any(|at| bytes[at] == b'*' && bytes[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0)
}

/// The regular expression of a wildcard pattern: `*` is any text, `\*` a star, `\\` a
/// backslash; anchored at both ends.
fn wildcard(pattern: &str) -> Regex {
    let mut parts: Vec<String> = vec![String::new()];
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some('*') | Some('\\')) => {
                parts.last_mut().expect("one part").push(chars.next().expect("peeked"));
            }
            '*' => parts.push(String::new()),
            c => parts.last_mut().expect("one part").push(c),
        }
    }
    let last = parts.len() - 1;
    let mut source = String::from("(?s)^");
    for (index, part) in parts.iter().enumerate() {
        let part = collapse(part);
        // One trailing ` *` also matches the bare command: `git *` matches `git`.
        if parts.len() == 2 && index == 0 && parts[1].is_empty() && part.ends_with(' ') {
            source.push_str(&regex::escape(part.trim_end_matches(' ')));
            source.push_str("(?: |$)");
        } else {
            source.push_str(&regex::escape(&part));
        }
        if index < last {
            source.push_str(".*");
        }
    }
    source.push('$');
    Regex::new(&source).expect("escaped text and .* make a valid expression")
}
