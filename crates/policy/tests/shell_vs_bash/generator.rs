//! A seeded generator of bash command lines that try to slip past `bash_allowlist`:
//! redirections of every kind, digit words of every size, reserved words, line continuations,
//! comments, here-documents, quoting and substitutions, network redirections, the catalogued
//! tools' dangerous options and the file utilities' targets, mixed with the ordinary lines
//! the step should approve.
//!
//! Lines may hold placeholders the test fills in before it judges them: `{home}` (the
//! scratch home's absolute path), `{root}` (the scratch tree's) and `{port}` (where the test
//! listens for connections that must never come).

/// splitmix64: small, seedable and good enough to spread choices.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Commands the generated policy allows. `echo`, `printf`, `test` and `[` are builtins made
/// external in the sandbox; the catalogued tools are the real programs.
pub const ALLOWED: &[&str] = &[
    "ls", "cat", "echo", "grep", "head", "wc", "printf", "test", "[", "find", "sed", "awk", "sort", "tee", "dd",
    "time", "cp", "mv", "ln", "mkdir", "rm", "rmdir", "touch", "chmod", "install", "truncate", "split", "tar", "unzip",
    "curl",
];

/// The allowed commands whose targets the step checks as writes.
pub const WRITERS: &[&str] = &[
    "cp", "mv", "ln", "mkdir", "rm", "rmdir", "touch", "chmod", "install", "truncate", "split", "tar", "unzip", "curl",
];

/// Commands that must never run in an approved line.
pub const FORBIDDEN: &[&str] = &["id", "evil", "xargs", "env", "eval", "source", "exec", "command", "sh", "bash"];

/// Redirection targets: allowed, always allowed, forbidden, uncertain, descriptor-like.
const TARGETS: &[&str] = &[
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "out/r1",
    "./out/r2",
    "out//r3",
    "run.log",
    "f1",
    ".bashrc",
    "~/.bashrc",
    "$HOME/f2",
    "out/../f3",
    "out",
    "in.txt",
    "'f 4'",
    "\"out/r5\"",
    "o\\ut/r6",
    "1",
    "2",
    "-",
    "0",
    "2147483647",
    "2147483648",
    "99999999999",
    "$fd",
    "f$(echo 5)",
    "`echo f6`",
    "*.txt",
    "{a,b}",
    "/dev/tcp/127.0.0.1/{port}",
    "/dev/udp/127.0.0.1/{port}",
    "//dev/./tcp/127.0.0.1/{port}",
    "\"$NET\"",
];

/// Digit words of every size, some with leading zeros.
const DIGITS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "9",
    "10",
    "255",
    "256",
    "65535",
    "2147483646",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "99999999999999999999",
    "0002",
    "00000000002147483648",
    "000000000000000000001",
];

const OPS: &[&str] = &[">", ">>", ">|", "&>", "&>>", "<>", "<", "<<<", ">&", "<&", "> ", ">> ", "< "];

/// Arguments for the catalogued tools, dangerous and harmless.
fn tool_args(rng: &mut Rng, name: &str) -> String {
    let options: &[&str] = match name {
        "find" => &[
            ". -name in.txt",
            ". -type f",
            ". -exec rm {} +",
            ". -execdir id \\;",
            ". -ok rm {} \\;",
            ". -fprint f7",
            ". -fprint out/f8",
            ". -fls f9",
            ". -fprintf f10 %p",
            ". -delete",
            ". -maxdepth 1 -print0",
        ],
        "sed" => &[
            "-n 1p in.txt",
            "s/a/b/ in.txt",
            "'1e id' in.txt",
            "'s/a/id/e' in.txt",
            "'w f11' in.txt",
            "'w out/f12' in.txt",
            "'s/a/b/w f13' in.txt",
            "-n '/a/W f14' in.txt",
            "-i s/a/b/ in.txt",
            "-i s/a/b/ out/a",
            "-i.bak s/a/b/ out/a",
            "--in-place s/a/b/ out/a",
            "-e p -e 'e id' in.txt",
            "'1{e id\n}' in.txt",
            "-n '$p' in.txt",
            "'y/ab/ba/' in.txt",
            "-E 's/(a|b)/c/g' in.txt",
            "'1i\\\nx' in.txt",
            "'1a x' in.txt",
            "--sandbox 1p in.txt",
        ],
        "awk" => &[
            "'{print $1}' in.txt",
            "'$1 > \"a\"' in.txt",
            "'BEGIN{system(\"id\")}'",
            "'{print | \"id\"}' in.txt",
            "'BEGIN{\"id\" | getline; print}'",
            "'{print > \"f15\"}' in.txt",
            "'{print > \"out/f16\"}' in.txt",
            "'{printf \"x\" >> \"f17\"}' in.txt",
            "-v x=1 'BEGIN{print x}'",
            "-F: '{print NF}' in.txt",
            "'BEGIN{f=\"system\"; @f(\"id\")}'",
            "'NR==1 || NR==2' in.txt",
            "-e 'BEGIN{print 1}'",
        ],
        "sort" => &[
            "in.txt",
            "-r in.txt",
            "-o f18 in.txt",
            "-o out/f19 in.txt",
            "-of20 in.txt",
            "--output=f21 in.txt",
            "--compress-program=id in.txt",
            "-k2 in.txt",
        ],
        "tee" => &["out/f22", "f23", "-a run.log", "/dev/null", "-- -x", ".bashrc", "out/f24 f25"],
        "dd" => &["if=in.txt of=f26", "if=in.txt of=out/f27", "if=in.txt of=/dev/null", "if=in.txt", "of=.bashrc"],
        "printf" => &["'%s\\n' a", "-v x a", "-v 'a[$(id)]' a", "'%d' 3"],
        "test" | "[" => &["-f in.txt", "-v x", "-v 'a[$(id)]'", "-d out", "a = a"],
        "cp" => &[
            "in.txt out/c1",
            "in.txt out/",
            "in.txt out/a.log",
            "in.txt run.log",
            "in.txt .bashrc",
            "in.txt ~/.bashrc",
            "in.txt ../home/c2",
            "in.txt {home}/c3",
            "-t out in.txt",
            "-t . in.txt",
            "-r out out/sub",
            "-r out sub",
            "--parents in.txt out",
            "-s {root}/work/in.txt out/c4",
            "-b in.txt out/a",
        ],
        "mv" => &[
            "out/a out/m1",
            "in.txt out/",
            "out/a .",
            "out/a ../home/.bashrc",
            "-t out in.txt",
            "out/a {home}/m2",
            "out out2",
        ],
        "ln" => &[
            "-s in.txt out/l1",
            "-sf ../../home/.bashrc out/l2",
            "-s {home}/.bashrc out/l3",
            "-s {home}/.bashrc out/l4; echo x >> out/l4",
            "-s {home} out/l5; echo x > out/l5/.bashrc",
            "{home}/.bashrc out/h1; echo x >> out/h1",
            "in.txt out/h2",
            "-s out/a",
            "-sfr out/a out/l6",
            "-s ../in.txt out/l7",
            "-sf in.txt .bashrc",
        ],
        "mkdir" => {
            &["out/d1", "-p out/d2/d3", "-p d4/d5", "d6", "-p ../home/.config/x", "-p {home}/x", "-m 700 out/d7"]
        }
        "rm" => &[
            "out/a",
            "-rf out/sub",
            "-f in.txt",
            "-rf out",
            "-f ../home/.bashrc",
            "-f {home}/.bashrc",
            "-rf ~",
            "-f run.log",
            "-r .",
            "-f -- out/a",
        ],
        "rmdir" => &["out/sub", "-p out/sub/deep", "out", "{home}"],
        "touch" => {
            &["out/t1", "t2", "run.log", "~/.hushlogin", "{home}/.x", "-d yesterday out/a", "-d yesterday in.txt"]
        }
        "chmod" => &["+x out/a", "-w out/a", "-R 700 out", "600 in.txt", "777 {home}/.bashrc", "-R u+w .", "-w in.txt"],
        "install" => &[
            "-m 644 in.txt out/i1",
            "in.txt i2",
            "-d out/i3/i4",
            "-D in.txt out/i5/i6",
            "-t out in.txt",
            "in.txt {home}/i7",
            "-D in.txt i8/i9",
        ],
        "truncate" => &["-s 0 out/a", "-s 0 in.txt", "-s 1 ~/.bashrc", "-s 0 run.log", "-s 0 {home}/.bashrc"],
        "split" => {
            &["-l 1 in.txt out/p-", "-l 1 in.txt", "-l 1 in.txt p-", "-l 1 in.txt ../home/p", "-l 1 in.txt {home}/p"]
        }
        "tar" => &[
            "-xf a.tar -C out",
            "-xf a.tar",
            "-xf a.tar -C .",
            "-tf a.tar",
            "-xOf a.tar t1",
            "xf a.tar",
            "-C out -xf a.tar",
            "-xf a.tar -C ../home",
            "-xf a.tar -C {home}",
            "-xf a.tar --one-top-level=x -C out",
            "xfC a.tar out",
            "xfC a.tar {home}",
        ],
        "unzip" => {
            &["-oq a.zip -d out", "-oq a.zip", "-l a.zip", "-p a.zip z1", "-oq a.zip -d ../home", "-qo a.zip -d {home}"]
        }
        "curl" => &[
            "-s file://{root}/work/in.txt -o out/u1",
            "-s file://{root}/work/in.txt -o u2",
            "-sO file://{root}/work/in.txt",
            "-s file://{root}/work/in.txt",
            "-s -o /dev/null file://{root}/work/in.txt",
            "-so {home}/.bashrc file://{root}/work/in.txt",
            "-sD out/u3 file://{root}/work/in.txt",
            "-sD u4 file://{root}/work/in.txt",
            "-sKcfg file://{root}/work/in.txt",
            "-s -c jar file://{root}/work/in.txt",
            "-s --output-dir out -O file://{root}/work/in.txt",
        ],
        _ => return String::new(),
    };
    let mut args = rng.pick(options).to_owned();
    if name == "[" {
        args.push_str(" ]");
    }
    args
}

fn word(rng: &mut Rng) -> String {
    match rng.below(14) {
        0 => rng.pick(DIGITS).to_owned(),
        1 => "'a b'".to_owned(),
        2 => "\"$HOME\"".to_owned(),
        3 => format!("$({})", small_command(rng)),
        4 => format!("`{}`", small_command(rng)),
        5 => format!("<({})", small_command(rng)),
        6 => "*.txt".to_owned(),
        7 => "${x:-y}".to_owned(),
        8 => "\\;".to_owned(),
        9 => "x#y".to_owned(),
        _ => rng.pick(&["in.txt", "-la", "-n", "a", "out", "-r", "."]).to_owned(),
    }
}

fn command_name(rng: &mut Rng) -> String {
    let name = match rng.below(24) {
        0..=17 => rng.pick(ALLOWED),
        18..=20 => rng.pick(FORBIDDEN),
        21 => rng.pick(DIGITS),
        22 => rng.pick(&["if", "then", "fi", "!", "{", "}", "time", "[[", "((", "function", "coproc", "while", "do"]),
        _ => rng.pick(&["\\time", "'time'", "\\rm", "'id'", "\"ls\"", "l\\s", "$CMD", "./evil"]),
    };
    name.to_owned()
}

fn redirection(rng: &mut Rng) -> String {
    let fd = match rng.below(10) {
        0..=4 => String::new(),
        5..=7 => rng.pick(DIGITS).to_owned(),
        8 => rng.pick(&["{fd}", "{PATH}", "{a[1]}"]).to_owned(),
        _ => "2".to_owned(),
    };
    let op = rng.pick(OPS);
    let target = if op.starts_with(">&") || op.starts_with("<&") {
        if rng.chance(50) { rng.pick(DIGITS).to_owned() } else { rng.pick(TARGETS).to_owned() }
    } else if rng.chance(50) {
        rng.pick(&["/dev/null", "out/r1", "run.log", "/dev/stderr"]).to_owned()
    } else {
        rng.pick(TARGETS).to_owned()
    };
    format!("{fd}{op}{target}")
}

fn small_command(rng: &mut Rng) -> String {
    let name = rng.pick(&["ls", "echo", "cat", "id", "rm", "printf"]);
    format!("{name} {}", word(rng))
}

fn simple(rng: &mut Rng) -> String {
    let mut parts = Vec::new();
    if rng.chance(4) {
        parts.push(rng.pick(&["x=1", "PATH=/tmp", "a[$(id)]=1"]).to_owned());
    }
    if rng.chance(5) {
        parts.push(redirection(rng));
    }
    let name = command_name(rng);
    let tool = tool_args(rng, &name);
    parts.push(name);
    if !tool.is_empty() && rng.chance(85) {
        parts.push(tool);
    } else {
        for _ in 0..rng.below(3) {
            parts.push(word(rng));
        }
    }
    let redirections = match rng.below(10) {
        0..=5 => 0,
        6..=8 => 1,
        _ => 2,
    };
    for _ in 0..redirections {
        parts.push(redirection(rng));
    }
    parts.join(" ")
}

fn command(rng: &mut Rng) -> String {
    match rng.below(24) {
        0 => format!(
            "( {} ){}",
            simple(rng),
            if rng.chance(50) { format!(" {}", redirection(rng)) } else { String::new() }
        ),
        1 => format!(
            "{{ {}; }}{}",
            simple(rng),
            if rng.chance(50) { format!(" {}", redirection(rng)) } else { String::new() }
        ),
        2 => format!("time {}", simple(rng)),
        3 => format!("time -p {}", simple(rng)),
        4 => format!("if {}; then {}; fi", simple(rng), simple(rng)),
        5 => format!("! {}", simple(rng)),
        6 => format!("cat <<EOF\n$({})\nEOF", small_command(rng)),
        7 => format!("cat <<'EOF'\n{}\nEOF", simple(rng)),
        8 => format!("for x in a; do {}; done", simple(rng)),
        9 => "f() { id; }; f".to_owned(),
        _ => simple(rng),
    }
}

/// One line: a few commands joined by operators, maybe a comment, maybe continuations.
pub fn line(rng: &mut Rng) -> String {
    let mut line = command(rng);
    for _ in 0..rng.below(3) {
        line.push_str(rng.pick(&["; ", " && ", " || ", " | ", "\n", " & ", " |& ", ";"]));
        line.push_str(&command(rng));
    }
    if rng.chance(10) {
        line.push_str(rng.pick(&[" # rm x", " #; id", "#x"]));
    }
    // Line continuations anywhere: bash removes them before it reads words and keywords,
    // except inside single quotes and comments.
    for _ in 0..(if rng.chance(20) { 1 + rng.below(3) } else { 0 }) {
        let boundaries: Vec<usize> = (0..=line.len()).filter(|&i| line.is_char_boundary(i)).collect();
        let at = boundaries[rng.below(boundaries.len())];
        line.insert_str(at, "\\\n");
    }
    line
}
