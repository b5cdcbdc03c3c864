//! Option forms through which commonly allowed tools run other programs or write files.
//!
//! [`check`] reads an allowed command's arguments: a form that runs a program is refused with
//! the reason; a form that writes a named file returns that file, for the step to hold
//! against `allowed_write_paths`; a form that writes files it does not name (tar extraction,
//! `find -delete`, `split`) is refused. `docs/shell-allowlist.md` has the same catalogue as a
//! table.
//!
//! Every argument of a catalogued tool (for `printf`, its first) must be plain text: an
//! expansion or a glob could become one of these options. Long options are matched as GNU
//! `getopt_long` matches them, by any prefix (`--to-com` is `--to-command`).

use crate::shell::Word;

/// What the arguments of an allowed command may do, when nothing in them runs a program: the
/// files they write.
pub(super) type Writes<'a> = Vec<&'a str>;

/// Checks `name`'s arguments against the catalogue; returns the files they write, or why the
/// command is not approved.
pub(super) fn check<'a>(name: &str, args: &'a [Word]) -> Result<Writes<'a>, String> {
    let Some(tool) = tool(name) else { return Ok(Vec::new()) };
    // printf reads only its first argument as an option.
    let judged = if name == "printf" { args.get(..1).unwrap_or(&[]) } else { args };
    let mut texts = Vec::with_capacity(judged.len());
    for word in judged {
        let Some(text) = word.literal() else {
            return Err(format!(
                "'{name}' has the argument '{word}', which is not plain text and could be an option that runs a \
                 program or writes a file."
            ));
        };
        texts.push(text);
    }
    tool(&texts).map_err(|why| format!("'{name}': {why}"))
}

/// The checker for a catalogued tool.
type Tool = for<'a> fn(&[&'a str]) -> Result<Writes<'a>, String>;

fn tool(name: &str) -> Option<Tool> {
    Some(match name {
        "find" => find,
        "git" => git,
        "tar" => tar,
        "rsync" => rsync,
        "ssh" | "scp" | "sftp" => ssh,
        "sort" => sort,
        "split" | "csplit" => {
            |_: &[&str]| Err("it writes files named from a prefix (and 'split --filter' runs a command).".into())
        }
        "sed" => sed,
        "awk" | "gawk" | "mawk" | "nawk" => awk,
        "jobs" => jobs,
        "compgen" => compgen,
        "getopts" => getopts,
        "tee" => tee,
        "dd" => dd,
        "uniq" => uniq,
        "man" => man,
        "test" | "[" => test,
        "printf" => printf,
        _ => return None,
    })
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
                Some(file) => writes.push(*file),
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
                Some(file) => writes.push(file),
                None => return Err("'-o' has no file.".into()),
            }
        }
        if is_long_arg(name, "--output") {
            match arg.split_once('=') {
                Some((_, file)) => writes.push(file),
                None => match rest.get(index + 1) {
                    Some(file) => writes.push(*file),
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

fn tar<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut to_stdout = false;
    let mut writes = false;
    // The option letters, without the values that follow some of them.
    let mut letters = String::new();
    for (at, arg) in args.iter().enumerate() {
        if *arg == "--" {
            break;
        }
        if let Some((name, _)) = long(arg) {
            if is_any_long(name, TAR_RUNS) {
                return Err(format!("'--{name}' runs a program."));
            }
            if is_long(name, "to-stdout") && name.len() > 3 {
                to_stdout = true;
            } else if name == "list" {
                // An exact name wins over the longer names it abbreviates (`--listed-incremental`).
            } else if is_long(name, "extract") || is_long(name, "get") {
                letters.push('x');
            } else if is_any_long(name, TAR_WRITES) {
                writes = true;
            }
        } else if let Some(bundle) = arg.strip_prefix('-') {
            for letter in bundle.chars() {
                letters.push(letter);
                if TAR_VALUES.contains(letter) {
                    break;
                }
            }
        } else if at == 0 {
            // The old form, `tar xvf archive`: every letter is an option, and those that take
            // a value take the next words in turn.
            letters.push_str(arg);
        }
        if arg.contains(':') {
            return Err(format!("'{arg}' may name a remote archive, which tar reaches by running a remote shell."));
        }
    }
    if letters.contains(['I', 'F']) {
        return Err("'-I' / '-F' run a program.".into());
    }
    to_stdout |= letters.contains('O');
    let extracts = letters.contains('x');
    if writes || letters.contains(['c', 'r', 'u', 'A', 'g']) || (extracts && !to_stdout) {
        return Err("it creates, extracts or changes files.".into());
    }
    Ok(Vec::new())
}

/// rsync's long options that write or delete files other than the destination.
#[rustfmt::skip]
const RSYNC_WRITES: &[&str] = &[
    "log-file", "write-batch", "only-write-batch", "remove-source-files", "backup-dir", "temp-dir", "partial-dir",
];

fn rsync<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut operands = Vec::new();
    for arg in read(args, "efBTM", &["rsh", "rsync-path", "filter", "exclude", "include", "log-file", "temp-dir"]) {
        match arg {
            Arg::Short('e', _) => return Err("'-e' names the remote shell to run.".into()),
            Arg::Long(name, _) if is_long(name, "rsh") || is_long(name, "rsync-path") => {
                return Err(format!("'--{name}' names a program to run."));
            }
            Arg::Long(name, _) if is_any_long(name, RSYNC_WRITES) => {
                return Err(format!("'--{name}' writes or deletes files it does not name as the destination."));
            }
            Arg::Operand(operand) if operand.contains(':') => {
                return Err(format!("'{operand}' is remote, which rsync reaches by running a remote shell."));
            }
            Arg::Operand(operand) => operands.push(operand),
            _ => {}
        }
    }
    // Every operand but the first may be the destination.
    Ok(operands.into_iter().skip(1).collect())
}

/// ssh options (`-o Name=value`) that run a local program.
const SSH_RUNS: &[&str] = &["proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "include"];

fn ssh<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut writes = Vec::new();
    for arg in read(args, "BbcDEeFIiJLlmOoPpQRSWw", &[]) {
        match arg {
            Arg::Short('o', Some(option)) => {
                let key = option.split(['=', ' ', '\t']).next().unwrap_or("").to_ascii_lowercase();
                if SSH_RUNS.contains(&key.as_str()) {
                    return Err(format!("'-o {option}' runs a local program."));
                }
            }
            Arg::Short('F', _) => return Err("'-F' reads a configuration file, which can name programs to run.".into()),
            Arg::Short('S', _) => return Err("'-S' names a control socket, or for scp the program to run.".into()),
            Arg::Short('E', Some(file)) => writes.push(file),
            Arg::Short('o' | 'E', None) => return Err("an option has no value.".into()),
            _ => {}
        }
    }
    Ok(writes)
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
            Arg::Short('o', Some(file)) => writes.push(file),
            Arg::Long(name, Some(file)) if is_long(name, "output") => writes.push(file),
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
            Arg::Operand(file) => Some(file),
            _ => None,
        })
        .collect())
}

fn dd<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(args.iter().filter_map(|arg| arg.strip_prefix("of=")).collect())
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
    Ok(operands.into_iter().skip(1).collect())
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
        writes.extend(sed_script(script)?);
    }
    if in_place {
        writes.extend(operands);
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
