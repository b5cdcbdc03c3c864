//! `bash_allowlist`: approves a shell command line when every command it runs is allowed.
//!
//! The example approver of Inspect's documentation, made strict. The command line is the
//! call's `cmd` argument (Inspect's `bash(cmd=…)`), or its `command` argument. [`crate::shell`]
//! reads it; every simple command found, in lists, pipelines, groups and substitutions alike,
//! must pass:
//!
//! - `sudo` anywhere rejects the call unless `allow_sudo` is set; with it, the command after
//!   sudo's options (`-u user`, `-g group`, `-E`, `-H`, `-n`, `--`…) is checked in its place.
//! - The command word must be a plain word listed in `allowed_commands`, compared exactly:
//!   `/bin/ls` is not `ls`. Quotes and backslashes are removed first, as bash removes them, so
//!   `'ls'` and `l\s` are `ls`.
//! - With a `command_specific_rules` entry, the first argument that is not an option must be
//!   one of the listed subcommands; a command with no subcommand at all is not approved.
//!
//! - Every redirection that can create, truncate or change a file (`>`, `>>`, `>|`, `&>`,
//!   `&>>`, `<>`, `N>…`, `>&file`, `{var}>…`), on a command or on a group, must name
//!   `/dev/null`, `/dev/stdout`, `/dev/stderr` or a path matching `allowed_write_paths`
//!   (see the `paths` module). Descriptor copies (`2>&1`), input and here-strings
//!   write nothing.
//! - A redirection to or from `/dev/tcp/…` or `/dev/udp/…`, where bash itself opens a
//!   connection, escalates on any descriptor and whatever the program, and so does an input
//!   redirection from a name that is not plain text and could be one.
//! - `time` (with `-p`) at the start of a pipeline is bash's keyword and is judged as the
//!   pipeline it times; `\time` and `command time` are the external program, which runs its
//!   arguments.
//!
//! Everything uncertain escalates, so the next step decides: a line longer than
//! `max_command_bytes` (read without being parsed), a line the parser refuses, a command word
//! that is not plain text, variable assignments (`PATH=…`, `LD_PRELOAD=…`, `GIT_PAGER=…` make
//! an allowed command run something else), commands that run the command they are given
//! (`xargs`, `env`, `bash -c`, `eval`, `time`…) and builtins that change how later commands
//! run (`alias`, `hash`, `export`…), even when listed. Allowed tools whose options run
//! programs, reach the network or write files are read against a catalogue of those forms
//! (the `catalogue` module: `find -exec`, `git -c`, `tar --to-command`, `sed` `e` and `w`, `awk`
//! `system()`, `tee`, `dd of=`, `curl -o`/`-O`/`-K`, `wget`, `scp`, `rsync`, and the targets
//! of the file utilities: `cp`, `mv`, `ln`, `install`, `touch`, `mkdir`, `rm`, `chmod`,
//! `chown`, `truncate`, `split`, `tar -x`, `unzip`…): forms that run a program or write files
//! they do not name escalate, and files they write must be allowed by `allowed_write_paths`
//! in the way they are written (contents, the name, the name and its parents, a whole tree).
//!
//! Parsing and checking take time linear in the line's length, and the length is bounded, so
//! one evaluation costs at most a few milliseconds.

use std::fmt;

use serde_json::Value;

use std::collections::HashSet;

use super::{ParamError, Params, Subject, deny_unknown, opt_bool, opt_str_list, type_name};
use crate::call::{Answer, Call, Decision, Kind};
use crate::shell::{self, SimpleCommand, Word};
use paths::How;

mod catalogue;
mod paths;

#[cfg(test)]
mod tests;

/// The step's name in a policy file.
pub const NAME: &str = "bash_allowlist";

const ALLOWED_COMMANDS: &str = "allowed_commands";
const ALLOW_SUDO: &str = "allow_sudo";
const COMMAND_SPECIFIC_RULES: &str = "command_specific_rules";
const ALLOWED_WRITE_PATHS: &str = "allowed_write_paths";
const MAX_COMMAND_BYTES: &str = "max_command_bytes";

/// The longest command line read by default: 64 KiB, judged in about a millisecond.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 64 * 1024;

/// The arguments that may hold the command line, in the order they are tried.
const COMMAND_ARGUMENTS: [&str; 2] = ["cmd", "command"];

/// Commands that run a command given in their arguments or input: approving them would
/// approve a command this step never read.
#[rustfmt::skip]
const RUNNERS: &[&str] = &[
    // shells
    "ash", "bash", "busybox", "csh", "dash", "fish", "ksh", "mksh", "sh", "tcsh", "zsh",
    // builtins
    ".", "builtin", "command", "eval", "exec", "fc", "source", "trap",
    // wrappers
    "chroot", "doas", "env", "flock", "ionice", "ltrace", "nice", "nohup", "nsenter", "parallel", "pkexec",
    "runuser", "script", "setsid", "stdbuf", "strace", "su", "sudoedit", "systemd-run", "taskset", "timeout",
    "unbuffer", "unshare", "watch", "xargs",
    // the external `time` (`\\time`, `command time`), and more wrappers that run their arguments
    "time", "bwrap", "catchsegv", "chrt", "cpulimit", "dbus-run-session", "fakeroot", "faketime", "firejail", "gdb",
    "numactl", "perf", "prlimit", "proxychains", "proxychains4", "run-parts", "sg", "ssh-agent", "torsocks",
    "valgrind", "xvfb-run",
];

/// Builtins that change variables, options or how later commands are found, or that evaluate
/// variable names as arithmetic (where `a[$(…)]` runs a command).
#[rustfmt::skip]
const SHELL_STATE: &[&str] = &[
    "alias", "declare", "enable", "export", "hash", "let", "local", "mapfile", "read", "readarray", "readonly", "set",
    "shopt", "typeset", "unalias", "unset",
];

/// Approves command lines built only from allowed commands; rejects `sudo` unless allowed;
/// escalates everything else.
#[derive(Debug, Clone)]
pub struct BashAllowlist {
    /// Command words that may run, exactly as written in the policy.
    allowed_commands: Vec<String>,
    /// The allowed commands that are neither runners nor shell-state builtins: one lookup
    /// decides the common case.
    plain_commands: HashSet<String>,
    /// Whether `sudo <allowed command>` is allowed.
    allow_sudo: bool,
    /// Commands whose first non-option argument must be one of the listed subcommands.
    command_specific_rules: Vec<(String, Vec<String>)>,
    /// The files approved lines may write, besides `/dev/null`, `/dev/stdout` and `/dev/stderr`.
    allowed_write_paths: paths::WritePaths,
    /// Lines longer than this escalate without being read.
    max_command_bytes: usize,
}

// === impl BashAllowlist ===

impl BashAllowlist {
    /// Reads `allowed_commands` (required), `allow_sudo` (default false),
    /// `command_specific_rules` (a mapping of command to allowed subcommands),
    /// `allowed_write_paths` (path globs, default none) and `max_command_bytes` (default
    /// [`DEFAULT_MAX_COMMAND_BYTES`]).
    pub fn from_params(params: &Params) -> Result<Self, ParamError> {
        deny_unknown(
            NAME,
            params,
            &[ALLOWED_COMMANDS, ALLOW_SUDO, COMMAND_SPECIFIC_RULES, ALLOWED_WRITE_PATHS, MAX_COMMAND_BYTES],
        )?;
        let allowed_commands = opt_str_list(params, ALLOWED_COMMANDS)?.ok_or_else(|| {
            ParamError::at(ALLOWED_COMMANDS, format!("'{NAME}' needs '{ALLOWED_COMMANDS}', a list of command names"))
        })?;
        for command in &allowed_commands {
            if command.is_empty() || command.chars().any(char::is_whitespace) {
                return Err(ParamError::at(
                    ALLOWED_COMMANDS,
                    format!("'{command}' is not a command name (subcommands go under '{COMMAND_SPECIFIC_RULES}')"),
                ));
            }
        }
        let allow_sudo = opt_bool(params, ALLOW_SUDO)?.unwrap_or(false);
        let command_specific_rules = match params.get(COMMAND_SPECIFIC_RULES) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(rules)) => rules
                .iter()
                .map(|(command, subcommands)| {
                    if !allowed_commands.contains(command) {
                        return Err(ParamError::at(
                            COMMAND_SPECIFIC_RULES,
                            format!("'{command}' has rules but is not in '{ALLOWED_COMMANDS}'"),
                        ));
                    }
                    Ok((command.clone(), subcommand_list(command, subcommands)?))
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(ParamError::at(
                    COMMAND_SPECIFIC_RULES,
                    format!(
                        "'{COMMAND_SPECIFIC_RULES}' must map commands to lists of subcommands, not {}",
                        type_name(other)
                    ),
                ));
            }
        };
        let allowed_write_paths = paths::WritePaths::new(
            ALLOWED_WRITE_PATHS,
            opt_str_list(params, ALLOWED_WRITE_PATHS)?.unwrap_or_default(),
        )?;
        let max_command_bytes = match params.get(MAX_COMMAND_BYTES) {
            None | Some(Value::Null) => DEFAULT_MAX_COMMAND_BYTES,
            Some(Value::Number(n)) => {
                n.as_u64().filter(|&n| n > 0).and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                    ParamError::at(
                        MAX_COMMAND_BYTES,
                        format!("'{MAX_COMMAND_BYTES}' must be a positive whole number of bytes"),
                    )
                })?
            }
            Some(other) => {
                return Err(ParamError::at(
                    MAX_COMMAND_BYTES,
                    format!("'{MAX_COMMAND_BYTES}' must be a number of bytes, not {}", type_name(other)),
                ));
            }
        };
        let plain_commands = allowed_commands
            .iter()
            .filter(|name| !RUNNERS.contains(&name.as_str()) && !SHELL_STATE.contains(&name.as_str()))
            .cloned()
            .collect();
        Ok(BashAllowlist {
            allowed_commands,
            plain_commands,
            allow_sudo,
            command_specific_rules,
            allowed_write_paths,
            max_command_bytes,
        })
    }

    /// Approves when every command of the line is allowed, rejects a disallowed `sudo` anywhere
    /// in it, and escalates otherwise. In a review chain approval reads as `continue` and
    /// rejection as `terminate`.
    pub fn decide(&self, subject: &Subject<'_>) -> Answer {
        let (approve, reject) = match subject.kind {
            Kind::Approval => (Decision::Approve, Decision::Reject),
            Kind::Review => (Decision::Continue, Decision::Terminate),
        };
        let Some(line) = command_line(subject.call) else {
            return Answer::escalate("The call has no 'cmd' or 'command' argument holding a command line.");
        };
        if line.len() > self.max_command_bytes {
            return Answer::escalate(format!(
                "The command line is {} bytes long, over this step's limit of {} ({MAX_COMMAND_BYTES}); \
                 it was not read.",
                line.len(),
                self.max_command_bytes
            ));
        }
        let parse = shell::parse(line);
        // A visible sudo decides even when the rest of the line cannot be read.
        if !self.allow_sudo
            && let Some(command) = parse.commands.iter().find(|c| c.name().and_then(Word::literal).is_some_and(is_sudo))
        {
            return Answer::new(reject, format!("sudo is not allowed: '{command}'."));
        }
        if let Some(error) = parse.error {
            return Answer::escalate(format!("Cannot tell for certain which commands the line runs: {error}."));
        }
        if parse.commands.is_empty() {
            return Answer::escalate("The command line is empty.");
        }
        let mut allowed: Vec<&str> = Vec::new();
        let mut refusals: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for command in &parse.commands {
            match self.check(command) {
                Ok(Some(name)) if !allowed.contains(&name) => allowed.push(name),
                Ok(_) => {}
                Err(why) if seen.insert(why.clone()) => refusals.push(why),
                Err(_) => {}
            }
        }
        if !refusals.is_empty() {
            return Answer::escalate(refusals.join(" "));
        }
        if allowed.is_empty() {
            return Answer::escalate("The command line runs no command.");
        }
        Answer::new(approve, format!("All commands allowed: {}.", allowed.join(", ")))
    }

    /// The name of the allowed command `command` runs, `None` if it runs none (only
    /// redirections), or why it is not approved.
    fn check<'c>(&self, command: &'c SimpleCommand) -> Result<Option<&'c str>, String> {
        let mut words = command.words.as_slice();
        if !command.assignments.is_empty() {
            return Err(format!(
                "'{command}' sets variables, which can change what a command runs (PATH, LD_PRELOAD, pagers)."
            ));
        }
        for redirection in &command.redirections {
            self.check_redirection(redirection)?;
        }
        loop {
            let Some((first, args)) = words.split_first() else { return Ok(None) };
            let Some(name) = first.literal() else {
                return Err(format!("The command word '{first}' is not plain text, so what it runs cannot be known."));
            };
            if is_sudo(name) {
                if !self.allow_sudo {
                    return Err("sudo is not allowed.".to_owned());
                }
                words = sudo_command(args)?;
                continue;
            }
            if !self.plain_commands.contains(name) {
                return Err(if !self.allowed_commands.iter().any(|allowed| allowed == name) {
                    format!("Command '{name}' is not in the allowed list.")
                } else if RUNNERS.contains(&name) {
                    format!("Command '{name}' runs other commands, which this step cannot check.")
                } else {
                    format!(
                        "Command '{name}' changes variables or how later commands run, which this step cannot check."
                    )
                });
            }
            for write in catalogue::check(name, args)? {
                self.check_write(&write.path, write.how, &format!("'{name}'"))?;
            }
            if let Some((_, subcommands)) = self.command_specific_rules.iter().find(|(command, _)| command == name) {
                check_subcommand(name, args, subcommands)?;
            }
            return Ok(Some(name));
        }
    }
}

impl BashAllowlist {
    /// Refuses a redirection that may write a file outside the allowed paths, or that stores a
    /// descriptor in a variable whose name may matter to later commands.
    fn check_redirection(&self, redirection: &shell::Redirection) -> Result<(), String> {
        if let Some(name) = redirection.fd.as_deref().and_then(|fd| fd.strip_prefix('{')?.strip_suffix('}'))
            && !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(format!(
                "The redirection '{{{name}}}{}' sets the variable '{name}', which could be one that changes \
                 what commands run.",
                redirection.op
            ));
        }
        if redirection.op != "<<<" {
            match redirection.target.literal() {
                Some(path) if paths::is_network(path) => {
                    return Err(format!(
                        "The redirection '{}{}' opens a network connection (bash's {path}).",
                        redirection.op, redirection.target
                    ));
                }
                None if redirection.written().is_none() && may_name_network(&redirection.target) => {
                    return Err(format!(
                        "The redirection '{}{}' reads from a file whose name is not plain text, which could be a \
                         network connection (/dev/tcp/…).",
                        redirection.op, redirection.target
                    ));
                }
                _ => {}
            }
        }
        let Some(target) = redirection.written() else { return Ok(()) };
        let Some(path) = target.literal() else {
            return Err(format!(
                "The redirection '{}{target}' writes to a file whose name is not plain text.",
                redirection.op
            ));
        };
        self.check_write(path, How::Content, &format!("The redirection '{}'", redirection.op))
    }

    /// Refuses a write to `path` unless `allowed_write_paths` allows it as `how` says; `what`
    /// names the writer.
    fn check_write(&self, path: &str, how: How, what: &str) -> Result<(), String> {
        if self.allowed_write_paths.allows(path, how) {
            return Ok(());
        }
        let allowed = self.allowed_write_paths.patterns();
        Err(if allowed.is_empty() {
            format!(
                "{what} writes to '{path}'; this step allows writes only to /dev/null, /dev/stdout and /dev/stderr."
            )
        } else {
            format!("{what} writes to '{path}', which '{ALLOWED_WRITE_PATHS}' ({}) does not allow.", allowed.join(", "))
        })
    }
}

impl fmt::Display for BashAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{NAME} (commands: {}; sudo: ", self.allowed_commands.join(", "))?;
        f.write_str(if self.allow_sudo { "allowed" } else { "rejected" })?;
        for (command, subcommands) in &self.command_specific_rules {
            write!(f, "; {command}: {}", subcommands.join(", "))?;
        }
        if !self.allowed_write_paths.patterns().is_empty() {
            write!(f, "; writes: {}", self.allowed_write_paths.patterns().join(", "))?;
        }
        f.write_str(")")
    }
}

// === helpers ===

/// The command line: the first of [`COMMAND_ARGUMENTS`] that holds a string.
fn command_line(call: &Call) -> Option<&str> {
    COMMAND_ARGUMENTS.iter().find_map(|key| call.arguments.get(*key)?.as_str())
}

/// Whether a target whose text is not certain may expand to `/dev/tcp/…` or `/dev/udp/…`:
/// unless it is a process substitution (a `/dev/fd/N` path) or starts with plain text that
/// is not absolute (`in$n.txt`), it may.
fn may_name_network(target: &Word) -> bool {
    let raw = target.raw.as_str();
    if raw.starts_with("<(") || raw.starts_with(">(") {
        return false;
    }
    let plain = raw.find(['$', '`', '\'', '"', '\\', '*', '?', '[', '{', '~', '<', '>']).map_or(raw, |at| &raw[..at]);
    plain.is_empty() || plain.starts_with('/')
}

/// `sudo`, by name or by path: a path to sudo is still sudo.
fn is_sudo(name: &str) -> bool {
    name == "sudo" || name.ends_with("/sudo")
}

/// The words of the command sudo runs, after sudo's options.
///
/// Only options that do not change how the command is found are understood; `-i`, `-s`, `-e`,
/// `-l`, `-D`, `-R` and the rest escalate. Every option word must be plain text, because an
/// expansion could split into more words and move the command.
fn sudo_command(args: &[Word]) -> Result<&[Word], String> {
    let plain = |word: &Word| {
        word.literal().map(str::to_owned).ok_or_else(|| format!("sudo's argument '{word}' is not plain text."))
    };
    let mut at = 0;
    while let Some(word) = args.get(at) {
        let text = plain(word)?;
        at += 1;
        if text == "--" {
            break;
        }
        if !text.starts_with('-') || text == "-" {
            at -= 1;
            break;
        }
        let takes_value = if let Some(long) = text.strip_prefix("--") {
            match long.split_once('=') {
                Some(("user" | "group" | "preserve-env", _)) => false,
                None if matches!(long, "user" | "group") => true,
                None if matches!(long, "preserve-env" | "non-interactive" | "set-home" | "preserve-groups") => false,
                _ => return Err(format!("sudo option '{text}' is not understood here.")),
            }
        } else {
            let flags: Vec<char> = text.chars().skip(1).collect();
            let mut takes_value = false;
            for (index, flag) in flags.iter().enumerate() {
                match flag {
                    'A' | 'b' | 'E' | 'H' | 'k' | 'n' | 'P' | 'S' => {}
                    // The value is the rest of the word, or the next word.
                    'u' | 'g' => {
                        takes_value = index + 1 == flags.len();
                        break;
                    }
                    _ => return Err(format!("sudo option '-{flag}' is not understood here.")),
                }
            }
            takes_value
        };
        if takes_value {
            let value = args.get(at).ok_or_else(|| format!("sudo option '{text}' has no value."))?;
            plain(value)?;
            at += 1;
        }
    }
    let command = &args[at..];
    match command.first() {
        None => Err("sudo without a command.".to_owned()),
        // sudo reads leading `NAME=value` words as environment settings.
        Some(word) if word.literal().and_then(|t| t.split_once('=')).is_some_and(|(name, _)| shell::is_name(name)) => {
            Err(format!("sudo sets the variable '{word}', which can change what the command runs."))
        }
        Some(_) => Ok(command),
    }
}

/// Checks the first non-option argument of `name` against its allowed subcommands.
fn check_subcommand(name: &str, args: &[Word], subcommands: &[String]) -> Result<(), String> {
    let allowed = subcommands.join(", ");
    for word in args {
        let Some(text) = word.literal() else {
            return Err(format!("{name}: '{word}' is not plain text, so the subcommand is not certain."));
        };
        if text.starts_with('-') {
            continue;
        }
        if subcommands.iter().any(|s| s == text) {
            return Ok(());
        }
        return Err(format!("{name} subcommand '{text}' is not allowed (allowed: {allowed})."));
    }
    Err(format!("{name} without a subcommand is not allowed (allowed: {allowed})."))
}

/// One entry of `command_specific_rules`: a list of subcommands, or a lone one.
fn subcommand_list(command: &str, value: &Value) -> Result<Vec<String>, ParamError> {
    let entry = format!("{COMMAND_SPECIFIC_RULES}.{command}");
    let items = match value {
        Value::String(_) => std::slice::from_ref(value),
        Value::Array(items) => items.as_slice(),
        other => {
            return Err(ParamError::at(
                COMMAND_SPECIFIC_RULES,
                format!("'{entry}' must be a list of subcommands, not {}", type_name(other)),
            ));
        }
    };
    items
        .iter()
        .map(|item| match item {
            Value::String(s) if !s.is_empty() && !s.chars().any(char::is_whitespace) => Ok(s.clone()),
            Value::String(s) => {
                Err(ParamError::at(COMMAND_SPECIFIC_RULES, format!("'{entry}' lists '{s}', which is not one word")))
            }
            other => Err(ParamError::at(
                COMMAND_SPECIFIC_RULES,
                format!("'{entry}' must list strings, not {}", type_name(other)),
            )),
        })
        .collect()
}
