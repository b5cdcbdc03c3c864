//! The file utilities, whose job is writing: what each creates, changes, moves or removes.
//!
//! Each returns its targets with [`How`] they are touched, for the step to hold against
//! `allowed_write_paths`: a copy into a directory writes `dir/name`; a recursive copy, move
//! or removal writes the whole tree; a link makes what it points to writable through it, so
//! its target counts as written too. Backups, whose names come from a suffix, escalate.

use std::borrow::Cow;

use super::{Arg, How, RUNS, Write, Writes, is_any_long, is_long, long, read};

// --- copies ---

/// Where a copying tool's last operands go.
#[derive(Clone, Copy)]
pub(super) enum Dest<'a> {
    /// The last operand: a directory to copy into, or (for one source that is not written
    /// with a trailing `/`) the copy itself, whichever it turns out to be.
    Last,
    /// `-t DIR`: every operand is copied into DIR.
    Into(&'a str),
    /// `-T`: the last operand is the copy itself.
    Itself,
}

/// How a copying tool places its copies.
#[derive(Clone, Copy, Default)]
pub(super) struct Copy {
    /// Directories are copied with everything in them.
    pub(super) recursive: bool,
    /// The source's whole path is kept under the directory (`cp --parents`, `rsync -R`).
    pub(super) parents: bool,
    /// A source ending in `/` copies its contents, not itself (rsync).
    pub(super) contents_with_slash: bool,
}

/// One copy: its source, and the path it is written to.
struct Placed<'a> {
    source: &'a str,
    path: Cow<'a, str>,
}

/// The last component of `path`, when it names one (not `.`, `..` or `/`).
fn base(path: &str) -> Option<&str> {
    let name = path.trim_end_matches('/').rsplit('/').next()?;
    (!matches!(name, "" | "." | "..")).then_some(name)
}

/// `dir/name`.
fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Where each source of `operands` is written to.
fn place<'a>(operands: &[&'a str], dest: Dest<'a>, copy: Copy) -> Vec<Placed<'a>> {
    let (sources, target, into) = match dest {
        Dest::Into(dir) => (operands, dir, Some(true)),
        Dest::Last | Dest::Itself => match operands.split_last() {
            Some((target, sources)) if !sources.is_empty() => {
                let into = match dest {
                    Dest::Itself => Some(false),
                    // `--parents` needs a directory.
                    _ if sources.len() > 1 || target.ends_with('/') || copy.parents => Some(true),
                    _ => None,
                };
                (sources, *target, into)
            }
            _ => return Vec::new(),
        },
    };
    let mut placed = Vec::new();
    for &source in sources {
        if into != Some(true) {
            placed.push(Placed { source, path: Cow::Borrowed(target) });
        }
        if into != Some(false) {
            let name = if copy.parents {
                Some(source.trim_start_matches('/')).filter(|name| !name.is_empty())
            } else if copy.contents_with_slash && source.ends_with('/') {
                None
            } else {
                base(source)
            };
            let path = name.map_or(Cow::Borrowed(target), |name| Cow::Owned(join(target, name)));
            placed.push(Placed { source, path });
        }
    }
    placed
}

/// What copying `operands` writes: each copy, whole when recursive.
pub(super) fn copies<'a>(operands: &[&'a str], dest: Dest<'a>, copy: Copy) -> Writes<'a> {
    let how = if copy.recursive { How::Tree } else { How::Entry };
    let mut writes = Vec::new();
    for placed in place(operands, dest, copy) {
        if copy.parents {
            writes.push(Write::new(placed.path.clone(), How::WithParents));
        }
        writes.push(Write::new(placed.path, how));
    }
    writes
}

/// Reads the arguments of cp, mv, ln or install (`values` and `long_values` as [`read`] takes
/// them): returns them with where the copies go, or why backups escalate.
fn copy_options<'a>(args: &[&'a str], values: &str, long_values: &[&str]) -> Result<(Vec<Arg<'a>>, Dest<'a>), String> {
    let parsed = read(args, values, long_values);
    let mut dest = Dest::Last;
    for arg in &parsed {
        target_and_backups(arg, &mut dest)?;
    }
    Ok((parsed, dest))
}

/// The options cp, mv, ln and install share: the target directory, and backups.
fn target_and_backups<'a>(arg: &Arg<'a>, dest: &mut Dest<'a>) -> Result<(), String> {
    match *arg {
        Arg::Short('t', Some(dir)) => *dest = Dest::Into(dir),
        Arg::Long(name, Some(dir)) if name.len() > 2 && is_long(name, "target-directory") => *dest = Dest::Into(dir),
        Arg::Short('t', None) => return Err("'-t' has no directory.".into()),
        Arg::Short('T', _) => *dest = Dest::Itself,
        Arg::Long(name, _) if name.len() > 2 && is_long(name, "no-target-directory") => *dest = Dest::Itself,
        Arg::Short('b' | 'S', _) => return Err("backups are written under names built from a suffix.".into()),
        Arg::Long(name, _) if name.len() > 1 && is_any_long(name, &["backup", "suffix"]) => {
            return Err("backups are written under names built from a suffix.".into());
        }
        _ => {}
    }
    Ok(())
}

/// The operands among `args`.
fn operands<'a>(args: Vec<Arg<'a>>) -> Vec<&'a str> {
    args.into_iter()
        .filter_map(|arg| match arg {
            Arg::Operand(operand) => Some(operand),
            _ => None,
        })
        .collect()
}

/// Whether `args` hold the option `-letter` or `--long` (by any abbreviation: one that is
/// ambiguous makes the tool refuse to run, so reading it as either option is safe).
fn has(args: &[Arg<'_>], letter: Option<char>, long: Option<&str>) -> bool {
    args.iter().any(|arg| match *arg {
        Arg::Short(given, _) => Some(given) == letter,
        Arg::Long(name, _) => long.is_some_and(|long| is_long(name, long)),
        Arg::Operand(_) => false,
    })
}

/// The row of the backup options cp, mv, ln and install share.
const BACKUPS: (&str, &str) = ("`-b`/`--backup`, `-S`/`--suffix`", "escalates: backups are named from a suffix");

pub(super) const CP_ROWS: &[(&str, &str)] = &[
    (
        "the last operand, or `-t DIR`/`--target-directory=DIR`",
        "writes each copy: the operand itself, or `DIR/name` when it is a directory (both are checked unless `-t`, \
         `-T`, a trailing `/` or several sources settle it); with `-r`/`-R`/`-a` everything beneath it",
    ),
    ("`--parents`", "writes `DIR/source/path`, with the directories above it"),
    ("`-s`/`--symbolic-link`, `-l`/`--link`", "also writes each source (a link to it is made)"),
    BACKUPS,
];

pub(super) fn cp<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let (parsed, dest) = copy_options(args, "St", &["suffix", "target-directory"])?;
    let copy = Copy {
        recursive: has(&parsed, Some('r'), Some("recursive"))
            || has(&parsed, Some('R'), Some("recursive"))
            || has(&parsed, Some('a'), Some("archive")),
        parents: has(&parsed, None, Some("parents")),
        contents_with_slash: false,
    };
    let links = has(&parsed, Some('s'), Some("symbolic-link")) || has(&parsed, Some('l'), Some("link"));
    let operands = operands(parsed);
    let mut writes = copies(&operands, dest, copy);
    if links {
        writes.extend(sources(&operands, dest).iter().map(|source| Write::new(*source, How::Tree)));
    }
    Ok(writes)
}

/// The sources among `operands`: all of them with `-t`, else all but the last.
fn sources<'a, 'o>(operands: &'o [&'a str], dest: Dest<'a>) -> &'o [&'a str] {
    match dest {
        Dest::Into(_) => operands,
        _ => operands.split_last().map_or(&[], |(_, sources)| sources),
    }
}

pub(super) const MV_ROWS: &[(&str, &str)] = &[
    ("every source", "writes it, and everything beneath it (it is moved away)"),
    ("the last operand, or `-t DIR`/`--target-directory=DIR`", "writes each moved tree as `cp -r` does"),
    BACKUPS,
];

pub(super) fn mv<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let (parsed, dest) = copy_options(args, "St", &["suffix", "target-directory"])?;
    let operands = operands(parsed);
    let mut writes: Writes<'a> = sources(&operands, dest).iter().map(|source| Write::new(*source, How::Tree)).collect();
    writes.extend(copies(&operands, dest, Copy { recursive: true, ..Copy::default() }));
    Ok(writes)
}

pub(super) const LN_ROWS: &[(&str, &str)] = &[
    (
        "the link name: the last operand, `DIR/name` in `-t DIR` or a directory operand, or `name` in the working \
         directory for one operand",
        "writes it",
    ),
    (
        "what each link points to (for `-s`, relative to the link's directory unless `-r`)",
        "writes it and everything beneath it: what is written through the link lands there",
    ),
    BACKUPS,
];

pub(super) fn ln<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let (parsed, mut dest) = copy_options(args, "St", &["suffix", "target-directory"])?;
    let symbolic = has(&parsed, Some('s'), Some("symbolic"));
    let relative_to_here = has(&parsed, Some('r'), Some("relative"));
    let operands = operands(parsed);
    // One operand: a link of the same name in the working directory.
    if operands.len() == 1 && matches!(dest, Dest::Last) {
        dest = Dest::Into(".");
    }
    let mut writes = Vec::new();
    for placed in place(&operands, dest, Copy::default()) {
        let points_to = match placed.path.rsplit_once('/') {
            Some((dir, _)) if symbolic && !relative_to_here && !placed.source.starts_with('/') => {
                Cow::Owned(join(if dir.is_empty() { "/" } else { dir }, placed.source))
            }
            _ => Cow::Borrowed(placed.source),
        };
        writes.push(Write::new(points_to, How::Tree));
        writes.push(Write::new(placed.path, How::Entry));
    }
    Ok(writes)
}

pub(super) const LINK_ROWS: &[(&str, &str)] =
    &[("`link FILE LINK`", "writes LINK, and FILE (it can be written through the link)")];

pub(super) fn link<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    match operands(read(args, "", &[])).as_slice() {
        [file, link] => Ok(vec![Write::new(*file, How::Tree), Write::new(*link, How::Entry)]),
        _ => Ok(Vec::new()),
    }
}

pub(super) const INSTALL_ROWS: &[(&str, &str)] = &[
    ("the last operand, or `-t DIR`/`--target-directory=DIR`", "writes each copy as `cp` does"),
    ("`-D`", "also creates the directories above the copy"),
    ("`-d`/`--directory`", "writes every operand as a directory, with the directories above it"),
    ("`-s`/`--strip`, `--strip-program`", RUNS),
    BACKUPS,
];

pub(super) fn install<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let (parsed, dest) =
        copy_options(args, "gmoSt", &["group", "mode", "owner", "suffix", "target-directory", "strip-program"])?;
    if has(&parsed, Some('s'), Some("strip")) || has(&parsed, None, Some("strip-program")) {
        return Err("'-s' / '--strip' run the strip program.".into());
    }
    let directories = has(&parsed, Some('d'), Some("directory"));
    let leading = has(&parsed, Some('D'), None);
    let operands = operands(parsed);
    if directories {
        return Ok(operands.into_iter().map(|dir| Write::new(dir, How::WithParents)).collect());
    }
    let mut writes = copies(&operands, dest, Copy::default());
    if leading {
        writes.iter_mut().for_each(|write| write.how = How::WithParents);
        if let Dest::Into(dir) = dest {
            writes.push(Write::new(dir, How::WithParents));
        }
    }
    Ok(writes)
}

// --- names and metadata ---

/// Every operand, written as `how`.
fn each<'a>(args: &[&'a str], values: &str, long_values: &[&str], how: How) -> Writes<'a> {
    operands(read(args, values, long_values)).into_iter().map(|path| Write::new(path, how)).collect()
}

pub(super) const TOUCH_ROWS: &[(&str, &str)] = &[("every file operand", "writes it (its times, or a new file)")];

pub(super) fn touch<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut writes = each(args, "drt", &["date", "reference", "time"], How::Entry);
    // `touch -` changes standard output's times.
    writes.retain(|write| write.path != "-");
    Ok(writes)
}

pub(super) const MKDIR_ROWS: &[(&str, &str)] = &[
    ("every operand", "writes it"),
    ("`-p`/`--parents`", "also writes the directories above it, up to the directory an allowed pattern starts in"),
];

pub(super) fn mkdir<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let parsed = read(args, "m", &["mode"]);
    let how = if has(&parsed, Some('p'), Some("parents")) { How::WithParents } else { How::Entry };
    Ok(operands(parsed).into_iter().map(|dir| Write::new(dir, how)).collect())
}

pub(super) const MKNOD_ROWS: &[(&str, &str)] = &[("every operand", "writes it")];

pub(super) fn mknod<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(each(args, "m", &["mode"], How::Entry))
}

pub(super) const RM_ROWS: &[(&str, &str)] =
    &[("every operand", "writes it (removes it)"), ("`-r`/`-R`/`--recursive`", "writes everything beneath it too")];

pub(super) fn rm<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let parsed = read(args, "", &[]);
    let how = if has(&parsed, Some('r'), Some("recursive")) || has(&parsed, Some('R'), Some("recursive")) {
        How::Tree
    } else {
        How::Entry
    };
    Ok(operands(parsed).into_iter().map(|path| Write::new(path, how)).collect())
}

pub(super) const RMDIR_ROWS: &[(&str, &str)] = &[
    ("every operand", "writes it (removes it)"),
    ("`-p`/`--parents`", "writes every directory above it in the operand too"),
];

pub(super) fn rmdir<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let parsed = read(args, "", &[]);
    let parents = has(&parsed, Some('p'), Some("parents"));
    let mut writes = Vec::new();
    for dir in operands(parsed) {
        writes.push(Write::new(dir, How::Entry));
        let mut above = dir.trim_end_matches('/');
        while parents && let Some((parent, _)) = above.rsplit_once('/') {
            above = parent.trim_end_matches('/');
            if above.is_empty() {
                break;
            }
            writes.push(Write::new(above, How::Entry));
        }
    }
    Ok(writes)
}

pub(super) const UNLINK_ROWS: &[(&str, &str)] = &[("its operand", "writes it (removes it)")];

pub(super) fn unlink<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(each(args, "", &[], How::Entry))
}

pub(super) const SHRED_ROWS: &[(&str, &str)] =
    &[("every file operand", "writes it"), ("`-u`/`--remove`", "writes it (removes it)")];

pub(super) fn shred<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let parsed = read(args, "ns", &["iterations", "size", "random-source"]);
    let how = if has(&parsed, Some('u'), Some("remove")) { How::Entry } else { How::Content };
    let mut writes: Writes<'a> = operands(parsed).into_iter().map(|path| Write::new(path, how)).collect();
    writes.retain(|write| write.path != "-");
    Ok(writes)
}

/// Whether `arg` is one of chmod's mode options (`-w`, `-x`, `-rw`, `-g=r`…).
fn is_mode_option(arg: &str) -> bool {
    arg.strip_prefix('-').is_some_and(|mode| {
        !mode.is_empty() && !mode.starts_with('-') && mode.chars().all(|c| "rwxXstugoa,+-=01234567".contains(c))
    })
}

pub(super) const CHMOD_ROWS: &[(&str, &str)] = &[
    ("every file operand (after the mode, or all with `--reference`)", "writes it"),
    ("`-R`/`--recursive`", "writes everything beneath it too"),
];

pub(super) fn chmod<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    // chmod reads `-w`, `-x` and the like as the mode, and then takes no mode operand.
    let (modes, rest): (Vec<&'a str>, Vec<&'a str>) = {
        let end = args.iter().position(|arg| *arg == "--").unwrap_or(args.len());
        let (options, after) = args.split_at(end);
        let (modes, mut rest): (Vec<&str>, Vec<&str>) = options.iter().partition(|arg| is_mode_option(arg));
        rest.extend_from_slice(after);
        (modes, rest)
    };
    metadata(&rest, modes.is_empty())
}

pub(super) const CHOWN_ROWS: &[(&str, &str)] = &[
    ("every file operand (after the owner or group, or all with `--reference`)", "writes it"),
    ("`-R`/`--recursive`", "writes everything beneath it too"),
];

pub(super) fn chown<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    metadata(args, true)
}

/// chmod, chown and chgrp: the first operand is the mode, owner or group (when `first_is_not_a_file`
/// and there is no `--reference`); the rest are files, whole trees with `-R`.
fn metadata<'a>(args: &[&'a str], first_is_not_a_file: bool) -> Result<Writes<'a>, String> {
    let parsed = read(args, "", &["reference", "from"]);
    let reference = has(&parsed, None, Some("reference"));
    let how = if has(&parsed, Some('R'), Some("recursive")) { How::Tree } else { How::Entry };
    let mut files = operands(parsed).into_iter();
    if first_is_not_a_file && !reference {
        files.next();
    }
    Ok(files.map(|file| Write::new(file, how)).collect())
}

// --- contents ---

pub(super) const TRUNCATE_ROWS: &[(&str, &str)] = &[("every file operand", "writes it")];

pub(super) fn truncate<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(each(args, "rs", &["reference", "size"], How::Content))
}

pub(super) const FALLOCATE_ROWS: &[(&str, &str)] = &[("its file operand", "writes it")];

pub(super) fn fallocate<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    Ok(each(args, "lo", &["length", "offset"], How::Content))
}

/// The directory files named from `prefix` are written in: `out` for `out/x`, `.` for `x`.
fn prefix_directory(prefix: &str) -> &str {
    match prefix.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((dir, _)) => dir,
        None => ".",
    }
}

pub(super) const SPLIT_ROWS: &[(&str, &str)] = &[
    ("`--filter`", RUNS),
    (
        "the prefix (second operand, `x` by default)",
        "writes files named from it: everything beneath its directory must be allowed",
    ),
];

pub(super) fn split<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let parsed = read(
        args,
        "abCLlnt",
        &["suffix-length", "bytes", "line-bytes", "lines", "number", "separator", "additional-suffix", "filter"],
    );
    if has(&parsed, None, Some("filter")) {
        return Err("'--filter' runs a command.".into());
    }
    let prefix = operands(parsed).get(1).copied().unwrap_or("x");
    Ok(vec![Write::new(prefix_directory(prefix), How::Beneath)])
}

pub(super) const CSPLIT_ROWS: &[(&str, &str)] = &[
    ("the prefix (`-f`/`--prefix`, `xx` by default)", "writes files named from it, as `split` does"),
    ("`-b`/`--suffix-format` with a `/`", "escalates"),
];

pub(super) fn csplit<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut prefix = "xx";
    for arg in read(args, "bfn", &["suffix-format", "prefix", "digits"]) {
        match arg {
            Arg::Short('f', Some(given)) => prefix = given,
            Arg::Long(name, Some(given)) if is_long(name, "prefix") => prefix = given,
            Arg::Short('b', Some(format)) if format.contains('/') => {
                return Err(format!("the suffix format '{format}' has a '/', so the files may land elsewhere."));
            }
            Arg::Long(name, Some(format)) if is_long(name, "suffix-format") && format.contains('/') => {
                return Err(format!("the suffix format '{format}' has a '/', so the files may land elsewhere."));
            }
            _ => {}
        }
    }
    Ok(vec![Write::new(prefix_directory(prefix), How::Beneath)])
}

pub(super) const UNZIP_ROWS: &[(&str, &str)] = &[
    (
        "extraction (without `-l`, `-t`, `-v`, `-p`, `-c`, `-z`, `-Z`)",
        "writes beneath each `-d` directory, or beneath the working directory without one",
    ),
    ("`-:`", "escalates: members may climb out with `../`"),
];

pub(super) fn unzip<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    let mut directories = Vec::new();
    let mut lists = false;
    // Options before the archive's name; after it only `-d` and `-x` are still read.
    let mut archive = false;
    let mut at = 0;
    while let Some(&arg) = args.get(at) {
        at += 1;
        let Some(letters) = arg.strip_prefix('-').filter(|letters| !letters.is_empty()) else {
            archive = true;
            continue;
        };
        for (index, letter) in letters.char_indices() {
            match letter {
                'd' | 'P' => {
                    let rest = &letters[index + 1..];
                    let value = if rest.is_empty() {
                        at += 1;
                        args.get(at - 1).copied()
                    } else {
                        Some(rest)
                    };
                    if letter == 'd' {
                        directories.push(value.ok_or("'-d' has no directory.")?);
                    }
                    break;
                }
                ':' => return Err("'-:' lets members climb out of the directory with '../'.".into()),
                'l' | 't' | 'v' | 'p' | 'c' | 'z' | 'Z' if !archive => lists = true,
                _ => {}
            }
        }
    }
    if lists {
        return Ok(Vec::new());
    }
    if directories.is_empty() {
        directories.push(".");
    }
    Ok(directories.into_iter().map(|dir| Write::new(dir, How::Beneath)).collect())
}

pub(super) const PATCH_ROWS: &[(&str, &str)] =
    &[("any use but `--dry-run`", "escalates: writes the files the patch names")];

pub(super) fn patch<'a>(args: &[&'a str]) -> Result<Writes<'a>, String> {
    if args.iter().any(|arg| matches!(long(arg), Some((name, None)) if name.len() > 2 && is_long(name, "dry-run"))) {
        return Ok(Vec::new());
    }
    Err("it writes the files the patch names.".into())
}
