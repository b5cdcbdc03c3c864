//! Option forms through which commonly allowed tools run other programs, reach the network
//! or write files.
//!
//! [`check`] reads an allowed command's arguments: a form that runs a program is refused with
//! the reason; a form that writes a named file returns that file and [`How`] it is written,
//! for the step to hold against `allowed_write_paths`; a form that writes files it does not
//! name (`find -delete`, `curl -O`, `wget -P`) is refused. [`CATALOGUE`] is the one list of
//! tools and, beside each checker, the rows `docs/shell-allowlist.md` shows for it; a test
//! holds the document's table to [`table`].
//!
//! Every argument of a catalogued tool (for `printf`, its first) must be plain text: an
//! expansion or a glob could become one of these options, or a path outside the allowed
//! ones. Long options are matched as GNU `getopt_long` matches them, by any prefix (`--to-com`
//! is `--to-command`).

use std::borrow::Cow;

use super::paths::How;
use crate::shell::Word;

mod files;
mod net;

#[cfg(test)]
pub(super) use net::catalogued_options;

/// One file an allowed command's arguments write, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Write<'a> {
    /// The path as the arguments give it, or joined from them (`cp a dir/` writes `dir/a`).
    pub(super) path: Cow<'a, str>,
    /// How the write touches the path.
    pub(super) how: How,
}

impl<'a> Write<'a> {
    fn new(path: impl Into<Cow<'a, str>>, how: How) -> Self {
        Write { path: path.into(), how }
    }

    /// The contents of `path` are written.
    fn content(path: &'a str) -> Self {
        Write::new(path, How::Content)
    }
}

/// What the arguments of an allowed command may do, when nothing in them runs a program: the
/// files they write.
pub(super) type Writes<'a> = Vec<Write<'a>>;

/// Checks `name`'s arguments against the catalogue; returns the files they write, or why the
/// command is not approved.
pub(super) fn check<'a>(name: &str, args: &'a [Word]) -> Result<Writes<'a>, String> {
    let Some(entry) = entry(name) else { return Ok(Vec::new()) };
    // printf reads only its first argument as an option.
    let judged = if name == "printf" { args.get(..1).unwrap_or(&[]) } else { args };
    let mut texts = Vec::with_capacity(judged.len());
    for word in judged {
        let Some(text) = word.literal() else {
            return Err(format!(
                "'{name}' has the argument '{word}', which is not plain text and could be an option that runs a \
                 program or writes a file, or a path outside the allowed ones."
            ));
        };
        texts.push(text);
    }
    (entry.check)(&texts).map_err(|why| format!("'{name}': {why}"))
}

/// The checker for a catalogued tool.
type Tool = for<'a> fn(&[&'a str]) -> Result<Writes<'a>, String>;

/// One catalogued tool (or family of tools read alike), and what the documentation says of it.
pub(super) struct Entry {
    /// The command names.
    pub(super) names: &'static [&'static str],
    check: Tool,
    /// The documentation's rows: a form, and what it does.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the test that holds docs/shell-allowlist.md to them"))]
    pub(super) rows: &'static [(&'static str, &'static str)],
}

fn entry(name: &str) -> Option<&'static Entry> {
    CATALOGUE.iter().find(|entry| entry.names.contains(&name))
}

/// What a row's effect says, in the words the table uses: a form that *runs* escalates; one
/// that *writes F* is approved only when F is allowed; *escalates* is refused whatever it names.
const RUNS: &str = "runs";

/// Every catalogued tool, in the order of the documentation's table.
#[rustfmt::skip]
pub(super) const CATALOGUE: &[Entry] = &[
    Entry { names: &["find"], check: find, rows: &[
        ("`-exec`, `-execdir`, `-ok`, `-okdir`", RUNS),
        ("`-fprint F`, `-fprint0 F`, `-fprintf F …`, `-fls F`", "writes F"),
        ("`-delete`", "escalates: deletes what it finds"),
    ] },
    Entry { names: &["git"], check: git, rows: &[
        ("`-c …`, `--config-env …`, `--exec-path…` before the subcommand", "runs (configuration names programs)"),
        ("`--output=F` (`diff`, `log`…), `archive -o F`", "writes F"),
        ("`format-patch -o`/`--output-directory`", "escalates: writes files it does not name"),
        ("`grep -O`/`--open-files-in-pager`; `--upload-pack`, `--receive-pack`, `--exec`, `--extcmd`; \
          `--template`; `clone -c`/`--config`; `clone`/`archive`/`ls-remote -u`; `rebase -x`; `bisect run`; \
          `submodule foreach`", RUNS),
        ("`difftool`, `mergetool`, `filter-branch`, `filter-repo`", RUNS),
        ("`config` without a read option (`--get…`, `--list`, `-l`, `get`, `list`)",
         "escalates: writes configuration, which can name programs"),
    ] },
    Entry { names: &["tar"], check: tar, rows: &[
        ("`--to-command`, `-I`/`--use-compress-program`, `--checkpoint-action`, `--info-script`, \
          `-F`/`--new-volume-script`, `--rsh-command`, `--rmt-command`", RUNS),
        ("an argument with `:` (a remote archive)", "runs a remote shell"),
        ("`-x`/`--extract` without `-O`/`--to-stdout`", "writes beneath the `-C`/`--directory` directory, \
          or beneath the working directory without one"),
        ("`-x` with more than one `-C`, `-P`/`--absolute-names`, `--transform`/`--xform`, \
          `--keep-directory-symlink`", "escalates"),
        ("`-c`, `-r`, `-u`, `-A`, `-g`, `--delete`, `--remove-files`, `--index-file`…",
         "escalates: writes files it does not name"),
    ] },
    Entry { names: &["ssh"], check: ssh, rows: &[
        ("`-o ProxyCommand=…`, `LocalCommand`, `PermitLocalCommand`, `KnownHostsCommand`, `Include`; \
          `-F config`; `-S`", RUNS),
        ("`-E F`", "writes F"),
    ] },
    Entry { names: &["sort"], check: sort, rows: &[
        ("`--compress-program`", RUNS),
        ("`-o F`, `--output=F`", "writes F"),
    ] },
    Entry { names: &["sed"], check: sed, rows: &[
        ("command `e`, flag `s///e` (GNU)", RUNS),
        ("commands `w F`, `W F`, flag `s///w F`", "writes F"),
        ("`-i`/`--in-place`", "writes every file operand; with a suffix (`-i.bak`) escalates"),
        ("`-f`/`--file`; a script or option it cannot read", "escalates"),
    ] },
    Entry { names: &["awk", "gawk", "mawk", "nawk"], check: awk, rows: &[
        ("`system`, any `\\|` but `\\|\\|` (pipes, `\\|&`, `cmd \\| getline`), `@` (indirect calls, `@load`), \
          `/inet`", RUNS),
        ("a `>` after the first `print`/`printf` (output redirection)", "escalates: writes"),
        ("`-f`, `-i`, `-l`, `-E`, `-o`, `-p`, `-d`, `-D`, `-W`; unknown options", "escalates"),
    ] },
    Entry { names: &["jobs"], check: jobs, rows: &[("`-x`", RUNS)] },
    Entry { names: &["compgen"], check: compgen, rows: &[
        ("`-C`, `-F`, `-W` (its words are expanded, running substitutions)", RUNS),
    ] },
    Entry { names: &["getopts"], check: getopts, rows: &[
        ("a variable name that is not a plain name (`a[$(…)]`)", "runs (subscripts are evaluated)"),
    ] },
    Entry { names: &["tee"], check: tee, rows: &[("every file operand", "writes each")] },
    Entry { names: &["dd"], check: dd, rows: &[("`of=F`", "writes F")] },
    Entry { names: &["uniq"], check: uniq, rows: &[("a second operand", "writes it")] },
    Entry { names: &["man"], check: man, rows: &[
        ("`-P`/`--pager`, `-H`/`--html`, `-p`/`--preprocessor`, `-C`/`--config-file`, `-X`", RUNS),
    ] },
    Entry { names: &["test", "["], check: test, rows: &[
        ("`-v`, `-R`", "runs (variable subscripts are evaluated)"),
    ] },
    Entry { names: &["printf"], check: printf, rows: &[
        ("`-v`", "runs (variable subscripts are evaluated)"),
    ] },
    Entry { names: &["curl"], check: net::curl, rows: net::CURL_ROWS },
    Entry { names: &["wget"], check: net::wget, rows: net::WGET_ROWS },
    Entry { names: &["scp"], check: net::scp, rows: net::SCP_ROWS },
    Entry { names: &["rsync"], check: net::rsync, rows: net::RSYNC_ROWS },
    Entry { names: &["sftp"], check: net::sftp, rows: net::SFTP_ROWS },
    Entry { names: &["cp"], check: files::cp, rows: files::CP_ROWS },
    Entry { names: &["mv"], check: files::mv, rows: files::MV_ROWS },
    Entry { names: &["ln"], check: files::ln, rows: files::LN_ROWS },
    Entry { names: &["link"], check: files::link, rows: files::LINK_ROWS },
    Entry { names: &["install"], check: files::install, rows: files::INSTALL_ROWS },
    Entry { names: &["touch"], check: files::touch, rows: files::TOUCH_ROWS },
    Entry { names: &["mkdir"], check: files::mkdir, rows: files::MKDIR_ROWS },
    Entry { names: &["mkfifo", "mknod"], check: files::mknod, rows: files::MKNOD_ROWS },
    Entry { names: &["rm"], check: files::rm, rows: files::RM_ROWS },
    Entry { names: &["rmdir"], check: files::rmdir, rows: files::RMDIR_ROWS },
    Entry { names: &["unlink"], check: files::unlink, rows: files::UNLINK_ROWS },
    Entry { names: &["shred"], check: files::shred, rows: files::SHRED_ROWS },
    Entry { names: &["chmod"], check: files::chmod, rows: files::CHMOD_ROWS },
    Entry { names: &["chown", "chgrp"], check: files::chown, rows: files::CHOWN_ROWS },
    Entry { names: &["truncate"], check: files::truncate, rows: files::TRUNCATE_ROWS },
    Entry { names: &["fallocate"], check: files::fallocate, rows: files::FALLOCATE_ROWS },
    Entry { names: &["split"], check: files::split, rows: files::SPLIT_ROWS },
    Entry { names: &["csplit"], check: files::csplit, rows: files::CSPLIT_ROWS },
    Entry { names: &["unzip"], check: files::unzip, rows: files::UNZIP_ROWS },
    Entry { names: &["patch"], check: files::patch, rows: files::PATCH_ROWS },
];

/// The documentation's table of the catalogue, as Markdown.
#[cfg(test)]
pub(super) fn table() -> String {
    let mut table = String::from("| Tool | Form | Effect |\n|---|---|---|\n");
    for entry in CATALOGUE {
        let names: Vec<String> = entry.names.iter().map(|name| format!("`{name}`")).collect();
        for (form, effect) in entry.rows {
            table.push_str(&format!("| {} | {form} | {effect} |\n", names.join(", ")));
        }
    }
    table
}

// --- option reading ---

/// Whether `given` (what follows `--`, before any `=`) names the long option `full`, as
/// `getopt_long` reads abbreviations.
fn is_long(given: &str, full: &str) -> bool {
    !given.is_empty() && full.starts_with(given)
}

/// Whether `given` names any of the long options `full` (see [`is_long`]).
fn is_any_long(given: &str, full: &[&str]) -> bool {
    full.iter().any(|full| is_long(given, full))
}

/// Splits `--name=value` into the name and value.
fn long(arg: &str) -> Option<(&str, Option<&str>)> {
    let rest = arg.strip_prefix("--").filter(|rest| !rest.is_empty())?;
    Some(match rest.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (rest, None),
    })
}

/// One option or operand, as a GNU tool reads its arguments.
enum Arg<'a> {
    /// A short option letter, with its value when the letter takes one.
    Short(char, Option<&'a str>),
    /// A long option as given (possibly abbreviated), with an attached `=value`.
    Long(&'a str, Option<&'a str>),
    /// An operand.
    Operand(&'a str),
}

/// Reads GNU-style arguments: short bundles (`-xvf archive`), where the letters in
/// `short_values` take a value (the rest of the word, or the next word); long options; `--`
/// ends the options. Long options that take their value as the next word are listed in
/// `long_values` (full names; any abbreviation counts).
fn read<'a>(args: &[&'a str], short_values: &str, long_values: &[&str]) -> Vec<Arg<'a>> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut options = true;
    while let Some(&arg) = args.get(at) {
        at += 1;
        if !options || arg == "-" || !arg.starts_with('-') {
            out.push(Arg::Operand(arg));
        } else if arg == "--" {
            options = false;
        } else if let Some((name, value)) = long(arg) {
            let value = match value {
                None if is_any_long(name, long_values) => {
                    at += 1;
                    args.get(at - 1).copied()
                }
                value => value,
            };
            out.push(Arg::Long(name, value));
        } else {
            for (index, letter) in arg.char_indices().skip(1) {
                if short_values.contains(letter) {
                    let rest = &arg[index + letter.len_utf8()..];
                    let value = if rest.is_empty() {
                        at += 1;
                        args.get(at - 1).copied()
                    } else {
                        Some(rest)
                    };
                    out.push(Arg::Short(letter, value));
                    break;
                }
                out.push(Arg::Short(letter, None));
            }
        }
    }
    out
}

// --- tools ---

fn find<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut writes = Vec::new();
    for (at, arg) in args.iter().enumerate() {
        match *arg {
            "-exec" | "-execdir" | "-ok" | "-okdir" => return Err(format!("'{arg}' runs a command.")),
            "-delete" => return Err("'-delete' deletes the files it finds.".into()),
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => match args.get(at + 1) {
                Some(file) => writes.push(Write::content(file)),
                None => return Err(format!("'{arg}' has no file.")),
            },
            _ => {}
        }
    }
    Ok(writes)
}

/// git's global options that take the next word as their value.
const GIT_GLOBAL_VALUES: &[&str] =
    &["-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--attr-source"];

fn git<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut at = 0;
    while let Some(&arg) = args.get(at) {
        if !arg.starts_with('-') {
            break;
        }
        at += 1;
        let name = arg.split_once('=').map_or(arg, |(name, _)| name);
        if arg == "-c" || arg.starts_with("-c") || is_long_arg(name, "--config-env") || is_long_arg(name, "--exec-path")
        {
            return Err(format!("'{arg}' sets configuration or the program directory, which can run any program."));
        }
        if GIT_GLOBAL_VALUES.contains(&arg) {
            at += 1;
        }
    }
    let Some((&subcommand, rest)) = args.get(at..).and_then(<[&str]>::split_first) else { return Ok(Vec::new()) };
    let mut writes = Vec::new();
    for (index, &arg) in rest.iter().enumerate() {
        let name = arg.split_once('=').map_or(arg, |(name, _)| name);
        if subcommand == "format-patch" && (arg.starts_with("-o") || is_long_arg(name, "--output-directory")) {
            return Err("'git format-patch -o' writes files into a directory.".into());
        }
        if subcommand == "archive" && arg.starts_with("-o") && !arg.starts_with("--") {
            match arg.strip_prefix("-o").filter(|file| !file.is_empty()).or_else(|| rest.get(index + 1).copied()) {
                Some(file) => writes.push(Write::content(file)),
                None => return Err("'-o' has no file.".into()),
            }
        }
        if is_long_arg(name, "--output") {
            match arg.split_once('=') {
                Some((_, file)) => writes.push(Write::content(file)),
                None => match rest.get(index + 1) {
                    Some(file) => writes.push(Write::content(file)),
                    None => return Err(format!("'{arg}' has no file.")),
                },
            }
        }
        let runs = is_long_arg(name, "--upload-pack")
            || is_long_arg(name, "--receive-pack")
            || is_long_arg(name, "--exec")
            || is_long_arg(name, "--extcmd")
            || (subcommand == "grep" && (arg.starts_with("-O") || is_long_arg(name, "--open-files-in-pager")))
            || is_long_arg(name, "--template")
            || (matches!(subcommand, "clone" | "archive" | "ls-remote") && arg == "-u")
            || (subcommand == "clone" && (arg.starts_with("-c") || is_long_arg(name, "--config")))
            || (subcommand == "rebase" && arg.starts_with("-x"))
            || (subcommand == "bisect" && arg == "run")
            || (subcommand == "submodule" && arg == "foreach");
        if runs {
            return Err(format!("'git {subcommand} {arg}' runs a command."));
        }
    }
    match subcommand {
        "difftool" | "mergetool" | "filter-branch" | "filter-repo" => {
            Err(format!("'git {subcommand}' runs configured or given programs."))
        }
        "config" if !rest.iter().any(|arg| is_git_config_read(arg)) => Err(
            "'git config' without a read option (--get, --list…) writes configuration, which can name programs to run."
                .into(),
        ),
        _ => Ok(writes),
    }
}

/// `--name` or an abbreviation of it, given as a whole option word (before `=`).
fn is_long_arg(word: &str, full: &str) -> bool {
    word.strip_prefix("--").is_some_and(|given| is_long(given, &full[2..]))
}

fn is_git_config_read(arg: &str) -> bool {
    matches!(
        arg,
        "-l" | "--list" | "--get" | "--get-all" | "--get-regexp" | "--get-urlmatch" | "--get-color" | "--get-colorbool"
    ) || matches!(arg, "get" | "list")
}

/// tar's long options that run a program; any abbreviation counts.
const TAR_RUNS: &[&str] = &[
    "to-command",
    "use-compress-program",
    "checkpoint-action",
    "info-script",
    "new-volume-script",
    "rsh-command",
    "rmt-command",
    "compress-program",
];
/// tar's modes and options that create, change or delete files.
const TAR_WRITES: &[&str] = &[
    "create",
    "append",
    "update",
    "catenate",
    "concatenate",
    "delete",
    "listed-incremental",
    "index-file",
    "remove-files",
    "volno-file",
];

/// tar's short options that take a value: in a `-` bundle, the rest of it or the next word.
const TAR_VALUES: &str = "fCTXbHKLNVgIF";

/// tar's long options that change where extracted files go, or let them leave it.
const TAR_ESCAPES: &[&str] = &["absolute-names", "transform", "xform", "keep-directory-symlink"];

fn tar<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut to_stdout = false;
    let mut writes = false;
    let mut escapes = None;
    // The option letters, without the values that follow some of them.
    let mut letters = String::new();
    let mut directories = Vec::new();
    let mut at = 0;
    // The value of an option: the rest of its word, or the next word.
    let value = |rest: &'a str, at: &mut usize| -> Option<&'a str> {
        if rest.is_empty() {
            *at += 1;
            args.get(*at - 1).copied()
        } else {
            Some(rest)
        }
    };
    if let Some(arg) = args.iter().take_while(|arg| **arg != "--").find(|arg| arg.contains(':')) {
        return Err(format!("'{arg}' may name a remote archive, which tar reaches by running a remote shell."));
    }
    while let Some(&arg) = args.get(at) {
        at += 1;
        if arg == "--" {
            break;
        }
        if let Some((name, given)) = long(arg) {
            if is_any_long(name, TAR_RUNS) {
                return Err(format!("'--{name}' runs a program."));
            }
            if is_long(name, "to-stdout") && name.len() > 3 {
                to_stdout = true;
            } else if name == "list" {
                // An exact name wins over the longer names it abbreviates (`--listed-incremental`).
            } else if is_long(name, "extract") || is_long(name, "get") {
                letters.push('x');
            } else if is_long(name, "directory") && name.len() > 2 {
                directories.extend(given.or_else(|| value("", &mut at)));
            } else if is_any_long(name, TAR_ESCAPES) || (is_long(name, "one-top-level") && given.is_some()) {
                escapes = Some(name);
            } else if is_any_long(name, TAR_WRITES) {
                writes = true;
            }
        } else if let Some(bundle) = arg.strip_prefix('-') {
            for (index, letter) in bundle.char_indices() {
                letters.push(letter);
                if TAR_VALUES.contains(letter) {
                    let given = value(&bundle[index + letter.len_utf8()..], &mut at);
                    if letter == 'C' {
                        directories.extend(given);
                    }
                    break;
                }
            }
        } else if at == 1 {
            // The old form, `tar xvf archive`: every letter is an option, and those that take
            // a value take the next words in turn.
            for letter in arg.chars() {
                letters.push(letter);
                if TAR_VALUES.contains(letter) {
                    let given = value("", &mut at);
                    if letter == 'C' {
                        directories.extend(given);
                    }
                }
            }
        }
    }
    if letters.contains(['I', 'F']) {
        return Err("'-I' / '-F' run a program.".into());
    }
    to_stdout |= letters.contains('O');
    if writes || letters.contains(['c', 'r', 'u', 'A', 'g']) {
        return Err("it creates or changes an archive, or files it does not name.".into());
    }
    if !letters.contains('x') || to_stdout {
        return Ok(Vec::new());
    }
    if let Some(name) = escapes {
        return Err(format!("'--{name}' lets extracted files leave the directory they are extracted into."));
    }
    if letters.contains('P') {
        return Err("'-P' keeps absolute member names, which extract anywhere.".into());
    }
    match directories.as_slice() {
        [] => Ok(vec![Write::new(".", How::Beneath)]),
        [directory] => Ok(vec![Write::new(*directory, How::Beneath)]),
        _ => Err("several '-C' directories, each relative to the one before.".into()),
    }
}

/// ssh options (`-o Name=value`) that run a local program.
const SSH_RUNS: &[&str] = &["proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "include"];

fn ssh<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut writes = Vec::new();
    for arg in read(args, "BbcDEeFIiJLlmOoPpQRSWw", &[]) {
        ssh_option(&arg)?;
        match arg {
            Arg::Short('E', Some(file)) => writes.push(Write::content(file)),
            Arg::Short('E', None) => return Err("an option has no value.".into()),
            _ => {}
        }
    }
    Ok(writes)
}

/// Refuses the options ssh and scp share that run a local program: `-o` with one of
/// [`SSH_RUNS`], `-F` (a configuration file) and `-S`.
fn ssh_option(arg: &Arg<'_>) -> Result<(), String> {
    match *arg {
        Arg::Short('o', Some(option)) => {
            let key = option.split(['=', ' ', '\t']).next().unwrap_or("").to_ascii_lowercase();
            if SSH_RUNS.contains(&key.as_str()) {
                return Err(format!("'-o {option}' runs a local program."));
            }
        }
        Arg::Short('F', _) => return Err("'-F' reads a configuration file, which can name programs to run.".into()),
        Arg::Short('S', _) => return Err("'-S' names a control socket, or for scp the program to run.".into()),
        Arg::Short('o', None) => return Err("an option has no value.".into()),
        _ => {}
    }
    Ok(())
}

fn sort<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut writes = Vec::new();
    for arg in read(
        args,
        "kotST",
        &[
            "output",
            "key",
            "field-separator",
            "buffer-size",
            "temporary-directory",
            "compress-program",
            "files0-from",
            "parallel",
            "batch-size",
            "sort",
            "random-source",
        ],
    ) {
        match arg {
            Arg::Long(name, _) if is_long(name, "compress-program") => {
                return Err("'--compress-program' runs a program.".into());
            }
            Arg::Short('o', Some(file)) => writes.push(Write::content(file)),
            Arg::Long(name, Some(file)) if is_long(name, "output") => writes.push(Write::content(file)),
            Arg::Short('o', None) => return Err("'-o' has no file.".into()),
            Arg::Long(name, None) if is_long(name, "output") => return Err("'--output' has no file.".into()),
            _ => {}
        }
    }
    Ok(writes)
}

fn tee<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(read(args, "", &[])
        .into_iter()
        .filter_map(|arg| match arg {
            Arg::Operand(file) => Some(Write::content(file)),
            _ => None,
        })
        .collect())
}

fn dd<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(args.iter().filter_map(|arg| arg.strip_prefix("of=")).map(Write::content).collect())
}

fn uniq<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let operands: Vec<&str> = read(args, "fsw", &["skip-fields", "skip-chars", "check-chars", "group", "all-repeated"])
        .into_iter()
        .filter_map(|arg| match arg {
            Arg::Operand(file) => Some(file),
            _ => None,
        })
        .collect();
    // `uniq [INPUT [OUTPUT]]`.
    Ok(operands.into_iter().skip(1).map(Write::content).collect())
}

fn man<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    for arg in read(args, "CMPmSseLprRE", &["pager", "config-file", "manpath", "preprocessor"]) {
        let runs = match arg {
            Arg::Short(letter, _) => matches!(letter, 'P' | 'H' | 'p' | 'C' | 'X'),
            Arg::Long(name, _) => is_any_long(name, &["pager", "html", "config-file", "preprocessor", "gxditview"]),
            Arg::Operand(_) => false,
        };
        if runs {
            return Err("the pager, browser, preprocessor or configuration options name programs to run.".into());
        }
    }
    Ok(Vec::new())
}

fn jobs<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    match args.iter().take_while(|arg| arg.starts_with('-') && **arg != "--").find(|arg| arg.contains('x')) {
        Some(_) => Err("'jobs -x' runs a command.".into()),
        None => Ok(Vec::new()),
    }
}

fn compgen<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    match args.iter().find(|arg| arg.starts_with('-') && arg.contains(['C', 'F', 'W'])) {
        Some(arg) => {
            Err(format!("'{arg}' runs a command or function, or expands words (running substitutions in them)."))
        }
        None => Ok(Vec::new()),
    }
}

fn getopts<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    match args.get(1) {
        Some(name) if crate::shell::is_name(name) => Ok(Vec::new()),
        Some(name) => Err(format!("the variable '{name}' is not a plain name; bash evaluates array subscripts.")),
        None => Ok(Vec::new()),
    }
}

fn test<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    match args.iter().find(|arg| matches!(**arg, "-v" | "-R")) {
        Some(flag) => Err(format!("'{flag}' evaluates a variable name, whose subscript can run commands.")),
        None => Ok(Vec::new()),
    }
}

fn printf<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    match args.first() {
        Some(first) if first.starts_with("-v") => {
            Err("'-v' evaluates the variable name, which can run commands.".into())
        }
        _ => Ok(Vec::new()),
    }
}

// --- sed ---

/// GNU sed's long options that neither run nor write anything (`-i` is read apart).
#[rustfmt::skip]
const SED_OPTIONS: &[&str] = &[
    "quiet", "silent", "regexp-extended", "null-data", "unbuffered", "separate", "posix", "sandbox", "debug",
    "line-length", "expression", "help", "version",
];

fn sed<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut scripts: Vec<&str> = Vec::new();
    let mut in_place = false;
    let mut operands = Vec::new();
    for arg in read(args, "efl", &["expression", "file", "line-length"]) {
        match arg {
            Arg::Short('e', Some(script)) => scripts.push(script),
            Arg::Long(name, Some(script)) if is_long(name, "expression") => scripts.push(script),
            Arg::Short('f', _) => return Err("'-f' reads the script from a file.".into()),
            Arg::Long(name, _) if is_long(name, "file") => return Err("'--file' reads the script from a file.".into()),
            Arg::Short('i', None) => in_place = true,
            Arg::Long(name, None) if is_long(name, "in-place") => in_place = true,
            Arg::Long(name, Some(_)) if is_long(name, "in-place") => {
                return Err("'--in-place' with a suffix writes backups to paths built from it.".into());
            }
            Arg::Short('s' | 'n' | 'E' | 'r' | 'z' | 'u' | 'l', _) => {}
            Arg::Short(letter, _) => return Err(format!("the option '-{letter}' is not understood here.")),
            Arg::Long(name, _) if is_any_long(name, SED_OPTIONS) => {}
            Arg::Long(name, _) => return Err(format!("the option '--{name}' is not understood here.")),
            Arg::Operand(operand) => operands.push(operand),
        }
    }
    // `-i` with letters after it in the bundle is a suffix (`-i.bak`); `read` gives it as the
    // value of nothing, so look for it directly.
    if args.iter().any(|arg| is_short_bundle(arg) && arg.split_once('i').is_some_and(|(_, suffix)| !suffix.is_empty()))
    {
        return Err("'-i' with a suffix writes backups to paths built from it.".into());
    }
    let mut operands = operands.into_iter();
    if scripts.is_empty() {
        scripts.extend(operands.next());
    }
    if scripts.is_empty() {
        return Err("it has no script.".into());
    }
    let mut writes = Vec::new();
    for script in scripts {
        writes.extend(sed_script(script)?.into_iter().map(Write::content));
    }
    if in_place {
        writes.extend(operands.map(Write::content));
    }
    Ok(writes)
}

/// A short option bundle (`-ni`), not a long option or an operand.
fn is_short_bundle(arg: &str) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg.len() > 1
}

/// Reads a GNU sed script; returns the files its `w` / `W` commands and `s///w` flags write, or
/// why it runs a command (`e`, `s///e`) or cannot be read.
fn sed_script(script: &str) -> Result<Vec<&str>, String> {
    let bytes = script.as_bytes();
    let mut writes = Vec::new();
    let mut at = 0;
    // The rest of the line from `from` (a file name or text), and where the next command starts.
    let to_line_end = |from: usize| {
        let end = bytes[from..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |n| from + n);
        (&script[from..end], end)
    };
    let skip_blanks = |mut at: usize| {
        while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t')) {
            at += 1;
        }
        at
    };
    loop {
        while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b';')) {
            at += 1;
        }
        let Some(&first) = bytes.get(at) else { return Ok(writes) };
        if first == b'#' {
            at = to_line_end(at).1;
            continue;
        }
        at = sed_address(bytes, at)?;
        if bytes.get(at) == Some(&b',') {
            at = sed_address(bytes, skip_blanks(at + 1))?;
        }
        at = skip_blanks(at);
        while bytes.get(at) == Some(&b'!') {
            at = skip_blanks(at + 1);
        }
        let Some(&command) = bytes.get(at) else { return Err("the sed script ends after an address.".into()) };
        at += 1;
        match command {
            b'{' | b'}' | b'=' | b'd' | b'D' | b'g' | b'G' | b'h' | b'H' | b'n' | b'N' | b'p' | b'P' | b'x' | b'z'
            | b'F' => {}
            b'l' | b'L' | b'q' | b'Q' => {
                at = skip_blanks(at);
                while bytes.get(at).is_some_and(u8::is_ascii_digit) {
                    at += 1;
                }
            }
            b'a' | b'i' | b'c' => at = sed_text(bytes, at),
            b':' | b'b' | b't' | b'T' | b'v' => {
                while bytes.get(at).is_some_and(|b| !matches!(b, b'\n' | b';')) {
                    at += 1;
                }
            }
            b'r' | b'R' | b'w' | b'W' => {
                let (file, end) = to_line_end(skip_blanks(at));
                if file.contains([';', '}']) {
                    return Err(format!("the sed file name '{file}' is ambiguous."));
                }
                if matches!(command, b'w' | b'W') {
                    writes.push(file);
                }
                at = end;
            }
            b'e' => return Err("the sed command 'e' runs a command.".into()),
            b's' | b'y' => {
                let delimiter = *bytes.get(at).ok_or("the sed script ends inside a command")?;
                if matches!(delimiter, b'\n' | b'\\') {
                    return Err("the sed delimiter is not understood.".into());
                }
                at = sed_part(bytes, at + 1, delimiter)?;
                at = sed_part(bytes, at, delimiter)?;
                if command == b's' {
                    loop {
                        match bytes.get(at) {
                            Some(b'g' | b'p' | b'i' | b'I' | b'm' | b'M' | b'0'..=b'9') => at += 1,
                            Some(b'e') => return Err("the sed flag 'e' runs the pattern space as a command.".into()),
                            Some(b'w') => {
                                let (file, end) = to_line_end(skip_blanks(at + 1));
                                if file.contains([';', '}']) {
                                    return Err(format!("the sed file name '{file}' is ambiguous."));
                                }
                                writes.push(file);
                                at = end;
                                break;
                            }
                            _ => break,
                        }
                    }
                }
                at = skip_blanks(at);
                if !matches!(bytes.get(at), None | Some(b'\n' | b';' | b'}' | b'#')) {
                    return Err("the sed script has text after a command.".into());
                }
            }
            other => return Err(format!("the sed command '{}' is not understood here.", other as char)),
        }
    }
}

/// An address at `at` (possibly none): a line number, `first~step`, `$`, `+N`, `~N`, or a
/// regular expression `/re/` or `\cREc` with `I` / `M` flags. Returns where it ends.
fn sed_address(bytes: &[u8], mut at: usize) -> Result<usize, String> {
    match bytes.get(at) {
        Some(b'0'..=b'9' | b'+' | b'~') => {
            at += 1;
            while bytes.get(at).is_some_and(|b| b.is_ascii_digit() || *b == b'~') {
                at += 1;
            }
            Ok(at)
        }
        Some(b'$') => Ok(at + 1),
        Some(b'/') => sed_flags(bytes, sed_part(bytes, at + 1, b'/')?),
        Some(b'\\') => {
            let delimiter = *bytes.get(at + 1).ok_or("the sed script ends inside an address")?;
            sed_flags(bytes, sed_part(bytes, at + 2, delimiter)?)
        }
        _ => Ok(at),
    }
}

fn sed_flags(bytes: &[u8], mut at: usize) -> Result<usize, String> {
    while matches!(bytes.get(at), Some(b'I' | b'M')) {
        at += 1;
    }
    Ok(at)
}

/// A regular expression or replacement up to an unescaped `delimiter`; returns the index after
/// the delimiter.
fn sed_part(bytes: &[u8], mut at: usize, delimiter: u8) -> Result<usize, String> {
    loop {
        match bytes.get(at) {
            None => return Err("the sed script ends inside a regular expression or replacement.".into()),
            Some(b'\\') => at += 2,
            Some(&b) if b == delimiter => return Ok(at + 1),
            Some(_) => at += 1,
        }
    }
}

/// The text of `a`, `i` or `c`: to the end of the line, where a backslash carries it on.
fn sed_text(bytes: &[u8], mut at: usize) -> usize {
    loop {
        match bytes.get(at) {
            None | Some(b'\n') => return at,
            Some(b'\\') => at += 2,
            Some(_) => at += 1,
        }
    }
}

// --- awk ---

/// gawk's long options that neither run nor write anything.
#[rustfmt::skip]
const AWK_OPTIONS: &[&str] = &[
    "field-separator", "assign", "characters-as-bytes", "traditional", "posix", "sandbox", "re-interval", "lint",
    "bignum", "use-lc-numeric", "non-decimal-data", "optimize", "no-optimize", "csv", "version", "help",
    "copyright",
];

fn awk<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut programs: Vec<&str> = Vec::new();
    let mut operands = Vec::new();
    for arg in read(args, "Fvfeil", &["field-separator", "assign", "file", "source", "include", "load", "exec"]) {
        match arg {
            Arg::Short('e', Some(program)) => programs.push(program),
            Arg::Long(name, Some(program)) if is_long(name, "source") => programs.push(program),
            Arg::Short('f' | 'i' | 'l', _) => {
                return Err("'-f', '-i' and '-l' load program text or extensions from files.".into());
            }
            Arg::Short('F' | 'v', _) => {}
            Arg::Short(letter @ ('o' | 'p' | 'd' | 'D' | 'E' | 'W'), _) => {
                return Err(format!("'-{letter}' writes a file, runs a debugger or passes implementation options."));
            }
            Arg::Short(
                'b' | 'c' | 'C' | 'h' | 'L' | 'M' | 'n' | 'N' | 'O' | 'P' | 'r' | 's' | 'S' | 't' | 'V' | 'g',
                _,
            ) => {}
            Arg::Short(letter, _) => return Err(format!("the option '-{letter}' is not understood here.")),
            Arg::Long(name, _) if is_any_long(name, AWK_OPTIONS) => {}
            Arg::Long(name, _) => return Err(format!("the option '--{name}' is not understood here.")),
            Arg::Operand(operand) => operands.push(operand),
        }
    }
    if programs.is_empty() {
        programs.extend(operands.first().copied());
    }
    if programs.is_empty() {
        return Err("it has no program.".into());
    }
    for program in programs {
        awk_program(program)?;
    }
    Ok(Vec::new())
}

/// Refuses an awk program that may run a command or write a file: `system`, any `|` but `||`
/// (pipes to and from commands, `|&`), `@` (gawk's indirect calls and directives), `/inet`
/// (gawk's network files), and any `>` after the first `print` (output redirection; a
/// comparison there must be in parentheses anyway, and is refused with it).
fn awk_program(program: &str) -> Result<(), String> {
    if program.contains("system") {
        return Err("the awk program calls 'system'.".into());
    }
    if program.contains('@') || program.contains("/inet") {
        return Err("the awk program uses '@' (indirect calls, directives) or network files.".into());
    }
    if program.split("||").any(|part| part.contains('|')) {
        return Err("the awk program uses a pipe to or from a command.".into());
    }
    if program.find("print").is_some_and(|at| program[at..].contains('>')) {
        return Err("the awk program may redirect output to a file ('>' after 'print').".into());
    }
    Ok(())
}
