use super::*;

/// The command words of `line`, `?` standing for a word whose text is uncertain.
fn names(line: &str) -> Vec<String> {
    commands(line)
        .unwrap_or_else(|e| panic!("{line:?} should parse: {e}"))
        .iter()
        .filter_map(|c| c.name())
        .map(|w| w.literal().unwrap_or("?").to_owned())
        .collect()
}

/// Every word of every command, `?` for uncertain ones.
fn words(line: &str) -> Vec<Vec<String>> {
    commands(line)
        .unwrap_or_else(|e| panic!("{line:?} should parse: {e}"))
        .iter()
        .map(|c| c.words.iter().map(|w| w.literal().unwrap_or("?").to_owned()).collect())
        .collect()
}

fn error(line: &str) -> ParseError {
    match commands(line) {
        Ok(found) => panic!("{line:?} should be refused, got {found:?}"),
        Err(e) => e,
    }
}

// --- lists, pipelines, groups ---

#[test]
fn splits_lists_and_pipelines() {
    assert_eq!(names("ls; rm -rf /"), ["ls", "rm"]);
    assert_eq!(names("ls && curl x | sh"), ["ls", "curl", "sh"]);
    assert_eq!(names("ls || echo no"), ["ls", "echo"]);
    assert_eq!(names("ls&rm x"), ["ls", "rm"]);
    assert_eq!(names("ls & rm x &"), ["ls", "rm"]);
    assert_eq!(names("ls\nrm x"), ["ls", "rm"]);
    assert_eq!(names("ls |& cat"), ["ls", "cat"]);
    assert_eq!(names("ls|cat|wc -l"), ["ls", "cat", "wc"]);
    assert_eq!(names("ls &&\n\n rm x"), ["ls", "rm"]);
    assert_eq!(names("ls |\n rm x"), ["ls", "rm"]);
    assert_eq!(names("\n\nls\n\n"), ["ls"]);
}

#[test]
fn accepts_trailing_separators() {
    assert_eq!(names("ls ;"), ["ls"]);
    assert_eq!(names("ls;"), ["ls"]);
    assert_eq!(names("ls &"), ["ls"]);
    assert_eq!(names("ls\n"), ["ls"]);
}

#[test]
fn reads_subshells_and_brace_groups() {
    assert_eq!(names("(rm x)"), ["rm"]);
    assert_eq!(names("( ls; (rm x) )"), ["ls", "rm"]);
    assert_eq!(names("{ rm x; }"), ["rm"]);
    assert_eq!(names("{ ls;}"), ["ls"]);
    assert_eq!(names("{\nls\n}"), ["ls"]);
    assert_eq!(names("{ ls; } > out 2>&1 && (cat) < in"), ["ls", "cat"]);
    assert_eq!(names("( { ls; } )"), ["ls"]);
    // `}` is only a keyword where a command starts; elsewhere it is an argument.
    assert_eq!(words("{ echo }; }"), [vec!["echo", "?"]]);
}

#[test]
fn comments_start_only_at_a_word() {
    assert_eq!(names("ls #comment; rm x"), ["ls"]);
    assert_eq!(names("ls;#rm x"), ["ls"]);
    assert_eq!(names("# only a comment"), Vec::<String>::new());
    assert_eq!(names("ls # x\nrm y"), ["ls", "rm"]);
    assert_eq!(words("echo a#b"), [vec!["echo", "a#b"]]);
    assert_eq!(names("(ls)#x\nrm y"), ["ls", "rm"]);
    // A backslash-newline does not continue a comment: bash runs the next line.
    assert_eq!(names("ls # x \\\nrm y"), ["ls", "rm"]);
}

#[test]
fn empty_lines_have_no_commands() {
    assert!(commands("").unwrap().is_empty());
    assert!(commands("   \n\t ").unwrap().is_empty());
}

// --- substitutions ---

#[test]
fn collects_command_substitutions_everywhere() {
    assert_eq!(names("echo $(rm -rf /)"), ["rm", "echo"]);
    assert_eq!(names("echo \"$(rm x)\""), ["rm", "echo"]);
    assert_eq!(names("echo `rm x`"), ["rm", "echo"]);
    assert_eq!(names("echo \"a `rm x` b\""), ["rm", "echo"]);
    assert_eq!(names("echo x$(rm x)y"), ["rm", "echo"]);
    assert_eq!(names("FOO=$(rm x) ls"), ["rm", "ls"]);
    assert_eq!(names("ls > $(rm x)"), ["rm", "ls"]);
    assert_eq!(names("cat <<< \"$(rm x)\""), ["rm", "cat"]);
    assert_eq!(names("echo $(echo $(rm x))"), ["rm", "echo", "echo"]);
    assert_eq!(names("echo \"$(echo ')')\""), ["echo", "echo"]);
    assert_eq!(names("echo $( ls | rm x )"), ["ls", "rm", "echo"]);
    assert_eq!(names("echo $()"), ["echo"]);
    assert_eq!(names("$(echo ls)"), ["echo", "?"]);
}

#[test]
fn collects_process_substitutions() {
    assert_eq!(names("ls >(rm x)"), ["rm", "ls"]);
    assert_eq!(names("cat <(curl x)"), ["curl", "cat"]);
    assert_eq!(names("cat < <(curl x)"), ["curl", "cat"]);
    // Inside a word bash still substitutes: `a<(ls)` is the one word `a/dev/fd/63`.
    assert_eq!(words("echo a<(rm x)"), [vec!["rm", "x"], vec!["echo", "?"]]);
    assert_eq!(words("ls 2>(rm x)"), [vec!["rm", "x"], vec!["ls", "?"]]);
}

#[test]
fn collects_substitutions_inside_parameter_words() {
    assert_eq!(names("echo ${x:-$(rm x)}"), ["rm", "echo"]);
    assert_eq!(names("echo \"${x:-\"$(rm x)\"}\""), ["rm", "echo"]);
    assert_eq!(names("echo ${x/a/`rm x`}"), ["rm", "echo"]);
    assert_eq!(names("echo ${x:-${y:-$(rm x)}}"), ["rm", "echo"]);
}

#[test]
fn unescapes_backquotes_as_bash_does() {
    assert_eq!(words("echo `echo \\$HOME`"), [vec!["echo", "?"], vec!["echo", "?"]]);
    assert_eq!(names("echo \"`echo \\\"hi\\\"`\""), ["echo", "echo"]);
    assert_eq!(error("echo `echo \\`rm x\\``"), ParseError::NestedBackquotes);
    // bash ends a backquote at the first unescaped backquote, quotes or not.
    assert_eq!(error("echo `echo '`'`"), ParseError::Unterminated("single quote"));
}

// --- words ---

#[test]
fn removes_quotes_from_literal_words() {
    assert_eq!(words("'ls' \"-la\" a\\ b"), [vec!["ls", "-la", "a b"]]);
    assert_eq!(words("l\\s"), [vec!["ls"]]);
    assert_eq!(words("l''s \"\"ls"), [vec!["ls", "ls"]]);
    assert_eq!(words("echo 'a' \"b\" && sudo rm"), [vec!["echo", "a", "b"], vec!["sudo", "rm"]]);
    assert_eq!(words("echo \"a\\$b\\\\c\\d\""), [vec!["echo", "a$b\\c\\d"]]);
    assert_eq!(words("echo 'a\\b'"), [vec!["echo", "a\\b"]]);
    assert_eq!(words("'/bin/rm'"), [vec!["/bin/rm"]]);
    assert!(commands("'ls'").unwrap()[0].words[0].quoted);
    assert!(!commands("ls").unwrap()[0].words[0].quoted);
}

#[test]
fn marks_expansions_globs_and_braces_uncertain() {
    for line in [
        "$CMD",
        "${CMD}",
        "$1",
        "$@",
        "l$x",
        "\"$x\"",
        "ls*",
        "l?",
        "[l]s",
        "{ls,-la}",
        "~/bin/ls",
        "$'ls'",
        "`echo ls`",
        "$((1+2))",
        "a}",
        "$",
    ] {
        let parsed = commands(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let name = parsed.last().and_then(SimpleCommand::name).unwrap();
        assert_eq!(name.literal(), None, "{line:?} must not be literal");
    }
    // `[` alone is the test command, and without a `]` after it no glob.
    assert_eq!(words("[ -f x ] a[b"), [vec!["[", "-f", "x", "]", "a[b"]]);
    assert_eq!(words("a[\"]\"]"), [vec!["?"]]);
    // Quoted, the same characters are plain text.
    assert_eq!(words("'ls*' \"~\" '{a,b}' x~"), [vec!["ls*", "~", "{a,b}", "x~"]]);
}

#[test]
fn ansi_c_strings_are_opaque_but_bounded() {
    assert_eq!(words("echo $'a\\'b' ; rm x"), [vec!["echo", "?"], vec!["rm", "x"]]);
    assert_eq!(error("echo $'abc"), ParseError::Unterminated("$'…' string"));
    // Inside double quotes `$'` is just a dollar and a quote.
    assert_eq!(words("echo \"$'\""), [vec!["echo", "?"]]);
}

#[test]
fn line_continuations_are_removed() {
    assert_eq!(words("l\\\ns -la"), [vec!["ls", "-la"]]);
    assert_eq!(words("ls \\\n -la"), [vec!["ls", "-la"]]);
    assert_eq!(names("ls &\\\n& rm x"), ["ls", "rm"]);
    assert_eq!(words("echo \"a\\\nb\""), [vec!["echo", "ab"]]);
    // Not inside single quotes.
    assert_eq!(words("echo 'a\\\nb'"), [vec!["echo", "a\\\nb"]]);
    // An escaped backslash before a newline is a backslash, and the newline separates.
    assert_eq!(words("echo \\\\\nrm x"), [vec!["echo", "\\"], vec!["rm", "x"]]);
    assert_eq!(names("ls \\\n"), ["ls"]);
}

// --- assignments and redirections ---

#[test]
fn separates_assignments_from_the_command_word() {
    let parsed = commands("FOO=1 BAR+=2 rm x").unwrap();
    assert_eq!(parsed[0].assignments, ["FOO=1", "BAR+=2"]);
    assert_eq!(parsed[0].name().unwrap().literal(), Some("rm"));
    let only = commands("FOO=bar").unwrap();
    assert_eq!(only[0].assignments, ["FOO=bar"]);
    assert!(only[0].words.is_empty());
    // Quoted names, expansions and later words are not assignments.
    assert_eq!(words("'FOO'=1"), [vec!["FOO=1"]]);
    assert_eq!(words("F\\OO=1"), [vec!["FOO=1"]]);
    assert_eq!(words("ls FOO=1"), [vec!["ls", "FOO=1"]]);
    assert_eq!(words("=x"), [vec!["=x"]]);
    assert_eq!(words("a[0]=1 ls"), [vec!["?", "ls"]]);
}

#[test]
fn skips_redirections() {
    assert_eq!(words("ls 2>&1 | cat"), [vec!["ls"], vec!["cat"]]);
    assert_eq!(words("ls > out 2> err < in >> log >| f <> g &> h &>> i <&0 >&- <<< s"), [vec!["ls"]]);
    assert_eq!(words("> out ls -la"), [vec!["ls", "-la"]]);
    assert_eq!(words("git 2>/dev/null status"), [vec!["git", "status"]]);
    assert_eq!(words("ls 2 >x"), [vec!["ls", "2"]]);
    let parsed = commands("ls 2>&1").unwrap();
    let redirection = &parsed[0].redirections[0];
    assert_eq!((redirection.fd.as_deref(), redirection.op, redirection.target.literal()), (Some("2"), ">&", Some("1")));
    // A command made only of a redirection still counts as a command.
    assert_eq!(commands("> out").unwrap().len(), 1);
}

#[test]
fn refuses_broken_redirections() {
    assert_eq!(error("ls >"), ParseError::MissingTarget);
    assert_eq!(error("ls > ;"), ParseError::MissingTarget);
    assert_eq!(error("ls > #x"), ParseError::MissingTarget);
    assert_eq!(error("echo x >>(cat)"), ParseError::MissingTarget);
}

// --- refusals ---

#[test]
fn refuses_unbalanced_quotes_and_groups() {
    assert_eq!(error("echo 'abc"), ParseError::Unterminated("single quote"));
    assert_eq!(error("echo \"abc"), ParseError::Unterminated("double quote"));
    assert_eq!(error("echo \"abc\\\""), ParseError::Unterminated("double quote"));
    assert_eq!(error("echo `abc"), ParseError::Unterminated("backquote"));
    assert_eq!(error("echo $(abc"), ParseError::Unterminated("command substitution"));
    assert_eq!(error("cat <(abc"), ParseError::Unterminated("process substitution"));
    assert_eq!(error("(ls"), ParseError::Unterminated("subshell"));
    assert_eq!(error("{ ls; "), ParseError::Unterminated("brace group"));
    assert_eq!(error("{ ls }"), ParseError::Unterminated("brace group"));
    assert_eq!(error("echo ${x"), ParseError::Unterminated("${…} expansion"));
    assert_eq!(error("echo $((1"), ParseError::Unterminated("arithmetic expansion"));
    assert_eq!(error("ls)"), ParseError::Unexpected(")".into()));
    // A comment swallows the closing parenthesis, as in bash.
    assert_eq!(error("echo $( # x )"), ParseError::Unterminated("command substitution"));
}

#[test]
fn refuses_syntax_errors() {
    assert_eq!(error("; ls"), ParseError::Unexpected(";".into()));
    assert_eq!(error("ls ;; rm"), ParseError::Unexpected(";;".into()));
    assert_eq!(error("ls &&"), ParseError::MissingCommand);
    assert_eq!(error("ls |"), ParseError::MissingCommand);
    assert_eq!(error("| ls"), ParseError::Unexpected("|".into()));
    assert_eq!(error("ls & & rm"), ParseError::Unexpected("&".into()));
    assert_eq!(error("()"), ParseError::Unexpected(")".into()));
    assert_eq!(error("{ }"), ParseError::Unexpected("}".into()));
    assert_eq!(error("(ls) rm"), ParseError::Unexpected("r".into()));
    assert_eq!(error("ls @(a|b)"), ParseError::Unexpected("(".into()));
    assert_eq!(error("a=(1 2)"), ParseError::Unexpected("(".into()));
    assert_eq!(error("ls && \n"), ParseError::MissingCommand);
}

#[test]
fn refuses_here_documents() {
    assert_eq!(error("cat <<EOF\nrm x\nEOF"), ParseError::HereDocument);
    assert_eq!(error("cat <<-EOF\nx\nEOF"), ParseError::HereDocument);
    assert_eq!(error("cat << 'EOF'\nx\nEOF"), ParseError::HereDocument);
}

#[test]
fn refuses_keywords_and_functions() {
    for (line, keyword) in [
        ("if true; then rm x; fi", "if"),
        ("for f in *; do rm $f; done", "for"),
        ("while true; do ls; done", "while"),
        ("until false; do ls; done", "until"),
        ("case x in x) rm;; esac", "case"),
        ("[[ -f x ]]", "[["),
        ("! rm x", "!"),
        ("ls | time rm x", "time"),
        (">x time rm x", "time"),
        ("function f { rm x; }", "function"),
        ("coproc rm x", "coproc"),
        ("ls; then", "then"),
        ("((x = 1))", "(("),
        ("FOO=1 if", "if"),
        ("echo $(case x in x) rm;; esac)", "case"),
    ] {
        assert_eq!(error(line), ParseError::Keyword(keyword.into()), "{line:?}");
    }
    assert_eq!(error("f() { rm x; }"), ParseError::FunctionDefinition("f".into()));
    assert_eq!(error("ls () { rm x; }"), ParseError::FunctionDefinition("ls".into()));
    // Quoted, a keyword is an ordinary command word.
    assert_eq!(names("'if' x"), ["if"]);
}

#[test]
fn refuses_arithmetic_beyond_numbers() {
    assert_eq!(words("echo $((1 + 2*(3-1)))"), [vec!["echo", "?"]]);
    assert_eq!(error("echo $((x + 1))"), ParseError::Arithmetic);
    assert_eq!(error("echo $(( $(rm x) ))"), ParseError::Arithmetic);
    assert_eq!(error("echo $(( a[$(rm x)] ))"), ParseError::Arithmetic);
    assert_eq!(error("echo $((1)+(2))"), ParseError::Arithmetic);
    assert_eq!(error("echo $[ '$(rm x)' ]"), ParseError::Arithmetic);
}

#[test]
fn refuses_uncertain_parameter_forms() {
    assert_eq!(error("echo ${!x}"), ParseError::Parameter("indirections (!)"));
    assert_eq!(error("echo ${a[$(rm x)]}"), ParseError::Parameter("array subscripts"));
    assert_eq!(error("echo ${#a[@]}"), ParseError::Parameter("array subscripts"));
    assert_eq!(error("echo ${x@P}"), ParseError::Parameter("transformations (@)"));
    assert_eq!(error("echo ${x:i}"), ParseError::Parameter("substrings"));
    // In double quotes these single quotes are characters and the substitution runs.
    assert_eq!(error("echo \"${x:-'$(rm x)'}\""), ParseError::Parameter("single quotes"));
    assert_eq!(error("echo ${x:-'a'}"), ParseError::Parameter("single quotes"));
    assert_eq!(error("echo ${x:-{a}}"), ParseError::Parameter("nested braces"));
    assert_eq!(error("echo ${}"), ParseError::Parameter("unusual forms"));
    // The forms it reads.
    let line = "echo ${x} ${#x} ${#} ${1} ${@} ${x:-a} ${x#*/} ${x%%.*} ${x//a/b} ${x^^} ${x,} ${x:+\"a b\"}";
    assert_eq!(words(line), [vec!["echo", "?", "?", "?", "?", "?", "?", "?", "?", "?", "?", "?", "?"]]);
}

#[test]
fn refuses_other_uncertain_syntax() {
    assert_eq!(error("echo $\"hello\""), ParseError::LocaleString);
    assert_eq!(error("ls\0; rm x"), ParseError::Nul);
}

#[test]
fn refuses_deep_nesting_without_overflowing() {
    let deep = format!("{}ls{}", "$(".repeat(MAX_DEPTH + 1), ")".repeat(MAX_DEPTH + 1));
    assert_eq!(error(&deep), ParseError::TooDeep);
    let fine = format!("{}ls{}", "$(".repeat(MAX_DEPTH - 1), ")".repeat(MAX_DEPTH - 1));
    // One command per level, plus the innermost `ls`.
    assert_eq!(names(&fine).len(), MAX_DEPTH);
    let very_deep = "( ".repeat(100_000);
    assert_eq!(error(&very_deep), ParseError::TooDeep);
}

// --- partial results ---

#[test]
fn keeps_what_was_read_before_an_error() {
    let parse = parse("ls; sudo rm x <<EOF\nEOF");
    assert_eq!(parse.error, Some(ParseError::HereDocument));
    let names: Vec<_> = parse.commands.iter().filter_map(|c| c.name()?.literal()).collect();
    assert_eq!(names, ["ls", "sudo"]);
}

#[test]
fn displays_commands_as_written() {
    let parsed = commands("FOO=1  ls   -la 'a b' > out").unwrap();
    assert_eq!(parsed[0].to_string(), "FOO=1 ls -la 'a b'");
    assert_eq!(parsed[0].args().len(), 2);
}

// --- bash 5.2's own tokenization ---

#[test]
fn takes_descriptor_numbers_only_when_they_fit_an_int() {
    let redirections =
        |line: &str| commands(line).unwrap().into_iter().flat_map(|c| c.redirections).collect::<Vec<_>>();
    assert_eq!(redirections("ls 2147483647>x")[0].fd.as_deref(), Some("2147483647"));
    assert_eq!(redirections("ls 0002147483647>x")[0].fd.as_deref(), Some("0002147483647"));
    assert_eq!(redirections("ls 2\\\n>x")[0].fd.as_deref(), Some("2"));
    // Too large: a word, then a redirection of standard output.
    assert_eq!(names("ls; 2147483648>x"), ["ls", "2147483648"]);
    assert_eq!(redirections("2147483648>x")[0].fd, None);
    assert_eq!(words("ls 99999999999999999999999<x"), [vec!["ls", "99999999999999999999999"]]);
    assert!(fits_int("0") && fits_int("2147483647") && fits_int("000000000002147483647"));
    assert!(!fits_int("2147483648") && !fits_int("4294967296") && !fits_int("") && !fits_int("1a"));
}

#[test]
fn says_which_redirections_write() {
    let written = |line: &str| {
        commands(line).unwrap()[0].redirections.iter().map(|r| r.written().map(|w| w.raw.clone())).collect::<Vec<_>>()
    };
    assert_eq!(
        written("ls > a >> b >| c &> d &>> e <> f 2>g"),
        vec![
            Some("a".to_owned()),
            Some("b".into()),
            Some("c".into()),
            Some("d".into()),
            Some("e".into()),
            Some("f".into()),
            Some("g".into())
        ]
    );
    assert_eq!(written("ls < a <<< b <&3 2>&1 >&2- >&- 3<&-"), vec![None; 7]);
    assert_eq!(
        written("ls >&file >&$fd >&2147483648"),
        vec![Some("file".to_owned()), Some("$fd".into()), Some("2147483648".into())]
    );
    assert_eq!(commands("ls {fd}>x").unwrap()[0].redirections[0].fd.as_deref(), Some("{fd}"));
    assert_eq!(error("ls {a[$x]}>x"), ParseError::VarRedirection("{a[$x]}".into()));
    assert_eq!(words("echo {a,b}>x"), [vec!["echo", "?"]]);
}

#[test]
fn keeps_redirections_of_groups() {
    let parsed = commands("(ls) > a; { ls; } 2>> b").unwrap();
    let targets: Vec<_> =
        parsed.iter().flat_map(|c| c.redirections.iter().map(|r| (c.words.is_empty(), r.target.raw.clone()))).collect();
    assert_eq!(targets, [(true, "a".to_owned()), (true, "b".to_owned())]);
}

#[test]
fn reads_time_as_a_keyword_at_the_start_of_a_pipeline() {
    assert_eq!(names("time ls"), ["ls"]);
    assert_eq!(names("time -p ls | cat"), ["ls", "cat"]);
    assert_eq!(names("time -p -- ls; time time ls"), ["ls", "ls"]);
    assert_eq!(names("ti\\\nme ls"), ["ls"]);
    assert_eq!(names("{ time ls; }; (time ls); echo $(time ls)"), ["ls", "ls", "ls", "echo"]);
    assert_eq!(names("time; ls"), ["ls"]);
    assert_eq!(names("\\time ls"), ["time"]);
    assert_eq!(names("'time' ls"), ["time"]);
    assert_eq!(names("time -p -p ls"), ["-p"]);
    assert_eq!(names("timex ls"), ["timex"]);
    assert_eq!(error("ls | time rm x"), ParseError::Keyword("time".into()));
    assert_eq!(error("ls | ti\\\nme rm x"), ParseError::Keyword("time".into()));
    assert_eq!(error("ls; i\\\nf true; then rm x; fi"), ParseError::Keyword("if".into()));
}

#[test]
fn reads_long_lines_in_linear_time() {
    for line in [
        "1".repeat(200_000),
        format!("{}>x", "1".repeat(200_000)),
        format!("f({})", " ".repeat(200_000)),
        format!("ls {}", "\\\n".repeat(100_000)),
        format!("ls {}x", "\\\n".repeat(100_000)),
    ] {
        let start = std::time::Instant::now();
        let _ = parse(&line);
        let limit = std::time::Duration::from_millis(if cfg!(debug_assertions) { 1_000 } else { 20 });
        assert!(start.elapsed() < limit, "{:?} for {:?}…", start.elapsed(), &line[..10]);
    }
}

#[test]
fn refuses_more_than_max_words() {
    let many = "ls;".repeat(MAX_WORDS);
    assert_eq!(names(&many).len(), MAX_WORDS);
    assert_eq!(error(&format!("{many}ls")), ParseError::TooManyWords);
    assert_eq!(error(&format!("ls {}", "a ".repeat(MAX_WORDS))), ParseError::TooManyWords);
    // Words inside substitutions count too.
    let half = "a ".repeat(MAX_WORDS / 2);
    assert_eq!(error(&format!("echo `echo {half}` $(echo {half})")), ParseError::TooManyWords);
}
