//! Tools that reach the network or another host: the local files they write, and the forms
//! that write files they do not name, read their options from a file, or run a program.
//!
//! curl and wget match long options by any unambiguous prefix, as getopt does, and an exact
//! name wins over the longer names it abbreviates (`--output` is not `--output-dir`).

use super::files::{self, Dest};
use super::{Arg, RUNS, Write, Writes, is_long, read, ssh_option};

/// What a catalogued option of curl or wget does.
#[derive(Clone, Copy)]
enum Does {
    /// Its value is a file whose contents it writes; `-` is standard output.
    Writes,
    /// It escalates, for the reason given.
    Escalates(&'static str),
}

/// One catalogued option: its letter, its long name, and what it does.
struct Opt {
    short: Option<char>,
    long: &'static str,
    does: Does,
}

const fn opt(short: Option<char>, long: &'static str, does: Does) -> Opt {
    Opt { short, long, does }
}

/// The catalogued option `given` (a long name, maybe abbreviated) names: the one it equals,
/// else one it abbreviates, an escalating one first. `None` for a name in `neutral`, the
/// uncatalogued options whose names abbreviate catalogued ones (curl's `--cookie` is not
/// `--cookie-jar`).
fn resolve<'t>(given: &str, table: &'t [Opt], neutral: &[&str]) -> Option<&'t Opt> {
    if neutral.contains(&given) {
        return None;
    }
    table.iter().find(|opt| opt.long == given).or_else(|| {
        let mut abbreviated = table.iter().filter(|opt| is_long(given, opt.long));
        let first = abbreviated.next()?;
        Some(abbreviated.find(|opt| matches!(opt.does, Does::Escalates(_))).unwrap_or(first))
    })
}

/// Reads `args` against `table`: returns the files the catalogued options write, or the
/// first reason to escalate. `values` are the short letters that take a value; `long_values`
/// the uncatalogued long options whose value may be the next word and must be read.
fn options<'a>(
    args: &[&'a str],
    values: &str,
    table: &[Opt],
    neutral: &[&str],
    long_values: &[&str],
    mut also: impl FnMut(&Arg<'a>) -> Result<(), String>,
) -> Result<Writes<'a>, String> {
    let mut long: Vec<&str> = table.iter().map(|opt| opt.long).collect();
    long.extend_from_slice(long_values);
    let mut writes = Vec::new();
    for arg in read(args, values, &long) {
        also(&arg)?;
        let (found, shown, value) = match arg {
            Arg::Short(letter, value) => {
                (table.iter().find(|opt| opt.short == Some(letter)), format!("-{letter}"), value)
            }
            Arg::Long(name, value) => {
                if let Some(base) = name.strip_prefix("expand-")
                    && resolve(base, table, neutral).is_some()
                {
                    return Err(format!("'--{name}' takes its value from variables, so what it names is not known."));
                }
                (resolve(name, table, neutral), format!("--{name}"), value)
            }
            Arg::Operand(_) => continue,
        };
        match found.map(|opt| opt.does) {
            None => {}
            Some(Does::Escalates(why)) => return Err(format!("'{shown}' {why}.")),
            Some(Does::Writes) => match value {
                None => return Err(format!("'{shown}' has no file.")),
                Some("-") => {}
                Some(file) => writes.push(Write::content(file)),
            },
        }
    }
    Ok(writes)
}

/// Every catalogued option of curl and wget, each as `-x` and `--name`.
#[cfg(test)]
pub(in crate::steps::bash_allowlist) fn catalogued_options() -> Vec<(&'static str, Vec<String>)> {
    [("curl", CURL), ("wget", WGET)]
        .into_iter()
        .map(|(tool, table)| {
            let names = table
                .iter()
                .flat_map(|opt| {
                    opt.short.map(|letter| format!("-{letter}")).into_iter().chain([format!("--{}", opt.long)])
                })
                .collect();
            (tool, names)
        })
        .collect()
}

// --- curl ---

/// curl's short options that take a value (7.88 and 8.x).
const CURL_VALUES: &str = "AbcCdDeEFHKmoPQrtTuUwxXyYz";

const NAMED_BY_THE_URL: &str = "writes a file named from the URL";

#[rustfmt::skip]
const CURL: &[Opt] = &[
    opt(Some('o'), "output", Does::Writes),
    opt(Some('D'), "dump-header", Does::Writes),
    opt(Some('c'), "cookie-jar", Does::Writes),
    opt(None, "trace", Does::Writes),
    opt(None, "trace-ascii", Does::Writes),
    opt(None, "stderr", Does::Writes),
    opt(None, "libcurl", Does::Writes),
    opt(None, "etag-save", Does::Writes),
    opt(None, "hsts", Does::Writes),
    opt(None, "alt-svc", Does::Writes),
    opt(Some('O'), "remote-name", Does::Escalates(NAMED_BY_THE_URL)),
    opt(None, "remote-name-all", Does::Escalates(NAMED_BY_THE_URL)),
    opt(Some('J'), "remote-header-name", Does::Escalates("writes a file named by the server")),
    opt(None, "output-dir", Does::Escalates("writes its output files into a directory")),
    opt(None, "create-dirs", Does::Escalates("creates the directories of its output files")),
    opt(Some('K'), "config", Does::Escalates("reads options from a file, and any of them may write files")),
    opt(Some('T'), "upload-file", Does::Escalates("sends a local file, and to a file:// URL writes one")),
    opt(None, "unix-socket", Does::Escalates("connects to a local socket")),
    opt(None, "abstract-unix-socket", Does::Escalates("connects to a local socket")),
    opt(None, "engine", Does::Escalates("loads a crypto engine, which can be a library of any code")),
];

/// The documentation's rows for curl.
pub(super) const CURL_ROWS: &[(&str, &str)] = &[
    (
        "`-o F`/`--output F`, `-D F`/`--dump-header F`, `-c F`/`--cookie-jar F`, `--trace F`, `--trace-ascii F`, \
         `--stderr F`, `--libcurl F`, `--etag-save F`, `--hsts F`, `--alt-svc F` (also bundled: `-so F`, `-sD F`)",
        "writes F (`-` is standard output)",
    ),
    ("`-o` with a `#1` template", "escalates: writes files named from the URL"),
    (
        "`-O`/`--remote-name`, `--remote-name-all`, `-J`/`--remote-header-name`, `--output-dir`, `--create-dirs` \
         (also bundled: `-sO`, `-sJO`)",
        "escalates: writes files it does not name",
    ),
    ("`-K`/`--config` (also `-sKcfg`)", "escalates: reads options from a file"),
    ("`-T`/`--upload-file`", "escalates: sends a local file, and to a `file://` URL writes one"),
    ("`--unix-socket`, `--abstract-unix-socket`, `--engine`", "escalates: local sockets, loaded code"),
    ("`-w @F`, `-w` with `%output{`", "escalates: reads the format from a file, or writes to one"),
    ("`--expand-…` of any option above", "escalates: its value comes from variables"),
];

pub(super) fn curl<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let writes = options(args, CURL_VALUES, CURL, &["cookie"], &["write-out"], |arg| {
        let format = match arg {
            Arg::Short('w', format) => format,
            Arg::Long(name, format) if is_long(name, "write-out") => format,
            _ => return Ok(()),
        };
        match format {
            Some(format) if format.starts_with('@') || format.contains("%output{") => {
                Err(format!("'-w {format}' reads its format from a file, or writes to a file."))
            }
            _ => Ok(()),
        }
    })?;
    if let Some(template) = writes.iter().find(|write| {
        let path = write.path.as_bytes();
        path.windows(2).any(|pair| pair[0] == b'#' && pair[1].is_ascii_digit())
    }) {
        return Err(format!("'-o {}' names its files from the URL's globs.", template.path));
    }
    Ok(writes)
}

// --- wget ---

/// wget's short options that take a value; `-n` takes the letter after it (`-nv`, `-nc`).
const WGET_VALUES: &str = "eoaiBtOTwQPUlARDIXn";

#[rustfmt::skip]
const WGET: &[Opt] = &[
    opt(Some('O'), "output-document", Does::Writes),
    opt(Some('o'), "output-file", Does::Writes),
    opt(Some('a'), "append-output", Does::Writes),
    opt(None, "save-cookies", Does::Writes),
    opt(None, "rejected-log", Does::Writes),
    opt(None, "hsts-file", Does::Writes),
    opt(Some('P'), "directory-prefix", Does::Escalates("writes its files into a directory, under names from the URLs")),
    opt(Some('i'), "input-file", Does::Escalates("downloads the URLs a file lists, each into a file of its own")),
    opt(Some('e'), "execute", Does::Escalates("runs a .wgetrc command, which can set any option")),
    opt(None, "config", Does::Escalates("reads a .wgetrc file, which can set any option")),
    opt(Some('r'), "recursive", Does::Escalates("writes a file for every link it follows")),
    opt(Some('m'), "mirror", Does::Escalates("writes a file for every link it follows")),
    opt(Some('p'), "page-requisites", Does::Escalates("writes a file for every page requisite")),
    opt(Some('b'), "background", Does::Escalates("writes its log to a file it names itself")),
    opt(Some('K'), "backup-converted", Does::Escalates("writes backups under names built from the files'")),
    opt(None, "backups", Does::Escalates("writes backups under names built from the files'")),
    opt(None, "warc-file", Does::Escalates("writes WARC files under names built from a prefix")),
    opt(None, "use-askpass", Does::Escalates("runs a program")),
];

/// The documentation's rows for wget.
pub(super) const WGET_ROWS: &[(&str, &str)] = &[
    (
        "`-O F`/`--output-document F`, `-o F`/`--output-file F`, `-a F`/`--append-output F`, `--save-cookies F`, \
         `--rejected-log F`, `--hsts-file F`",
        "writes F (`-O -` is standard output)",
    ),
    ("no `-O` (and no `--spider`)", "escalates: writes a file named from the URL"),
    (
        "`-P`/`--directory-prefix`, `-i`/`--input-file`, `-r`/`--recursive`, `-m`/`--mirror`, \
         `-p`/`--page-requisites`, `-b`/`--background`, `-K`/`--backup-converted`, `--backups`, `--warc-file`",
        "escalates: writes files it does not name",
    ),
    ("`-e`/`--execute`, `--config`", "escalates: sets any option"),
    ("`--use-askpass`", RUNS),
];

pub(super) fn wget<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut document = false;
    let mut spider = false;
    let writes = options(args, WGET_VALUES, WGET, &["reject"], &[], |arg| {
        match arg {
            Arg::Short('O', Some(_)) => document = true,
            Arg::Long(name, Some(_)) if is_long(name, "output-document") => document = true,
            Arg::Long(name, None) if is_long(name, "spider") && name.len() > 1 => spider = true,
            _ => {}
        }
        Ok(())
    })?;
    if !document && !spider {
        return Err("without '-O' it writes each download to a file named from the URL.".into());
    }
    Ok(writes)
}

// --- scp, rsync, sftp ---

/// Whether an operand names another host (`host:path`, `user@host:path`, `rsync://…`).
fn is_remote(operand: &str) -> bool {
    operand.contains(':')
}

/// The documentation's rows for scp.
pub(super) const SCP_ROWS: &[(&str, &str)] = &[
    ("a remote (`host:path`) operand", "escalates: network, through ssh"),
    ("`-o ProxyCommand=…` and the other ssh forms above; `-F`, `-S`, `-D`", RUNS),
    ("the last operand (a local copy)", "writes it as `cp` does (recursively with `-r`)"),
];

pub(super) fn scp<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut operands = Vec::new();
    let mut recursive = false;
    for arg in read(args, "cDFiJlPSoX", &[]) {
        ssh_option(&arg)?;
        match arg {
            Arg::Short('D', _) => return Err("'-D' names a local SFTP server program to run.".into()),
            Arg::Short('r', _) => recursive = true,
            Arg::Operand(operand) if is_remote(operand) => {
                return Err(format!("'{operand}' is on another host, reached over the network through ssh."));
            }
            Arg::Operand(operand) => operands.push(operand),
            _ => {}
        }
    }
    Ok(files::copies(&operands, Dest::Last, files::Copy { recursive, ..files::Copy::default() }))
}

/// rsync's long options that write or delete files other than the destination.
#[rustfmt::skip]
const RSYNC_WRITES: &[&str] = &[
    "log-file", "write-batch", "only-write-batch", "remove-source-files", "backup-dir", "temp-dir", "partial-dir",
];

/// The documentation's rows for rsync.
pub(super) const RSYNC_ROWS: &[(&str, &str)] = &[
    ("`-e`/`--rsh`, `--rsync-path`", RUNS),
    ("a remote (`host:path`, `host::module`, `rsync://`) operand", "escalates: network, through a remote shell"),
    (
        "`--log-file`, `--write-batch`, `--only-write-batch`, `--remove-source-files`, `--backup-dir`, \
         `-T`/`--temp-dir`, `--partial-dir`",
        "escalates: writes or deletes files it does not name",
    ),
    (
        "the last operand",
        "writes it as `cp` does (recursively with `-r`/`-a`; a source ending in `/` copies its contents; `-R` keeps \
         the source's path)",
    ),
];

pub(super) fn rsync<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut operands = Vec::new();
    let mut copy = files::Copy { contents_with_slash: true, ..files::Copy::default() };
    for arg in read(args, "efBTM", &["rsh", "rsync-path", "filter", "exclude", "include", "log-file", "temp-dir"]) {
        match arg {
            Arg::Short('e', _) => return Err("'-e' names the remote shell to run.".into()),
            Arg::Long(name, _) if is_long(name, "rsh") || is_long(name, "rsync-path") => {
                return Err(format!("'--{name}' names a program to run."));
            }
            Arg::Short('T', _) => return Err("'-T' writes temporary files into a directory it names.".into()),
            Arg::Long(name, _) if super::is_any_long(name, RSYNC_WRITES) => {
                return Err(format!("'--{name}' writes or deletes files it does not name as the destination."));
            }
            Arg::Short('r' | 'a', _) => copy.recursive = true,
            Arg::Long(name, _) if name.len() > 2 && (is_long(name, "recursive") || is_long(name, "archive")) => {
                copy.recursive = true
            }
            Arg::Short('R', _) => copy.parents = true,
            Arg::Long(name, _) if name.len() > 2 && is_long(name, "relative") => copy.parents = true,
            Arg::Operand(operand) if is_remote(operand) => {
                return Err(format!("'{operand}' is remote, which rsync reaches by running a remote shell."));
            }
            Arg::Operand(operand) => operands.push(operand),
            _ => {}
        }
    }
    // One operand alone is listed, not copied.
    if operands.len() < 2 {
        return Ok(Vec::new());
    }
    Ok(files::copies(&operands, Dest::Last, copy))
}

/// The documentation's rows for sftp.
pub(super) const SFTP_ROWS: &[(&str, &str)] =
    &[("any use", "escalates: it reads commands from its input, and `!command` there runs a local shell")];

pub(super) fn sftp<'a>(_: &[&'a str]) -> Result<Writes<'a>, String> {
    Err("it reads commands from its input, and '!command' there runs a local shell.".into())
}
