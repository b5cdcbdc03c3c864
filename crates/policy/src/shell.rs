//! Which simple commands a bash command line runs, or why that cannot be told for certain.
//!
//! The parser is pure and conservative: it answers only when it is sure that bash would split
//! the line the same way, and otherwise returns a [`ParseError`] that says what it refused. A
//! caller that approves commands must treat every error as "unknown", never as "nothing runs".
//!
//! Understood, following bash 5:
//! - lists and pipelines: `;`, `&`, newlines, `&&`, `||`, `|`, `|&`, and `#` comments at the
//!   start of a word;
//! - subshells `( … )` and brace groups `{ …; }`, with redirections after them;
//! - command substitution `$( … )` and `` `…` ``, and process substitution `<( … )` / `>( … )`,
//!   wherever they appear: in arguments, assignments, redirection targets, double quotes and
//!   `${…}` words. Their commands are collected with the others;
//! - quoting: `'…'`, `"…"` with its backslash rules, `\x` outside quotes, `$'…'` (kept opaque),
//!   and `\`-newline line continuations, removed as bash removes them (not in comments or
//!   single quotes);
//! - leading `NAME=value` / `NAME+=value` assignments and redirections (`<`, `>`, `>>`, `>|`,
//!   `<>`, `<&`, `>&`, `&>`, `&>>`, `<<<`), with an optional file descriptor number taken as
//!   bash 5.2 takes it (digits that fit a C `int`; `2147483648>x` is a word, then `>x`) or a
//!   `{name}` variable; redirections after a subshell or group are kept as a command of their
//!   own, made only of redirections ([`Redirection::written`] says which may write a file);
//! - the `time` keyword (with `-p` and `--`) at the start of a pipeline, which times the
//!   pipeline after it; keywords are recognised after line continuations are removed, as bash
//!   does (`ti\<newline>me` is `time`);
//! - `$name`, `$1`, `$@`…, `${name}`, `${#name}`, `${name op word}` for the `-` `=` `?` `+`
//!   `#` `%` `/` `^` `,` families, and `$(( … ))` over plain numbers.
//!
//! A word is [`Word::value`]`: Some(text)` only when its text is certain: no expansion, no
//! glob (`*`, `?`, `[` with a `]` after it), no brace (`{`, `}`), no leading `~`. `'ls'`, `"ls"` and `l\s` are all the
//! literal `ls`, because bash runs `ls` for each of them.
//!
//! Refused, with the reason: unbalanced quotes and parentheses, here-documents (`<<`), compound
//! commands and keywords (`if`, `for`, `while`, `case`, `[[`, `((`, `function`, `!`…, and `time`
//! anywhere but at the start of a pipeline, where bash runs the external program instead),
//! `{a[i]}>…` redirections,
//! function definitions, `$"…"`, nested backquotes, `$[ … ]`, arithmetic with names or expansions in it,
//! `${!…}`, `${a[…]}`, `${…@…}`, `${…:offset}`, quotes or braces inside a `${…}` word, NUL
//! characters, nesting deeper than [`MAX_DEPTH`], and more than [`MAX_WORDS`] words (which bounds
//! the work and memory one line can cost, whatever its length).
//!
//! Not the parser's business: what a command does with its arguments, aliases or functions the
//! shell's profile defines, and the values of variables. The `bash_allowlist` step decides which
//! commands and words it trusts.

use std::borrow::Cow;
use std::fmt;

#[cfg(test)]
mod tests;

/// How deep substitutions, subshells and groups may nest before the line is refused.
pub const MAX_DEPTH: usize = 32;

/// How many words (command words, arguments, assignments and redirection targets, counted
/// across substitutions) a line may have before it is refused. Ordinary lines have tens; no
/// one reviews thousands.
pub const MAX_WORDS: usize = 4096;

/// Words that bash treats as keywords at the start of a command; none starts a command this
/// parser can follow, besides `{`, which opens a brace group.
const KEYWORDS: &[&str] = &[
    "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if",
    "in", "select", "then", "time", "until", "while",
];

/// One simple command: assignments, then a command word and its arguments, with redirections
/// anywhere among them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The leading `NAME=value` words, as written.
    pub assignments: Vec<String>,
    /// The command word first, then its arguments. Empty for a command made only of
    /// assignments or redirections.
    pub words: Vec<Word>,
    /// The redirections, in order.
    pub redirections: Vec<Redirection>,
}

/// One word of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word as written.
    pub raw: String,
    /// The word after quote removal, when bash would certainly see exactly this text; `None`
    /// when it holds an expansion, a substitution, a glob, a brace or a leading tilde.
    pub value: Option<String>,
    /// Whether any part of the word was quoted or escaped (a quoted word is never a keyword).
    pub quoted: bool,
}

/// One redirection, such as `2>&1` or `> out.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirection {
    /// The file descriptor written before the operator, if any: a number that fits a C `int`,
    /// or `{name}` for a variable that receives a new descriptor.
    pub fd: Option<String>,
    /// The operator: `<`, `>`, `>>`, `>|`, `<>`, `<&`, `>&`, `&>`, `&>>` or `<<<`.
    pub op: &'static str,
    /// The file, descriptor or string the operator takes.
    pub target: Word,
}

/// What [`parse`] found: every simple command it read, and the error that stopped it, if any.
///
/// On an error, `commands` holds what was read before it (including the command being read), so
/// a caller can still refuse a line that visibly runs something forbidden.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parse {
    /// The simple commands, commands inside substitutions before the command that holds them.
    pub commands: Vec<SimpleCommand>,
    /// Why the line cannot be read with certainty, if it cannot.
    pub error: Option<ParseError>,
}

/// Why a command line cannot be read with certainty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A quote, substitution or group is not closed.
    #[error("unterminated {0}")]
    Unterminated(&'static str),
    /// A token where bash reports a syntax error.
    #[error("unexpected '{0}'")]
    Unexpected(String),
    /// The line ends where a command must follow.
    #[error("the line ends where a command is expected")]
    MissingCommand,
    /// A redirection operator with nothing after it.
    #[error("a redirection has no target")]
    MissingTarget,
    /// `<<` or `<<-`: the document's extent depends on later lines.
    #[error("here-documents (<<) are not supported")]
    HereDocument,
    /// A keyword that starts a compound command, or stands where a command is expected.
    #[error("the shell keyword '{0}' is not supported")]
    Keyword(String),
    /// `name() …`: the body would run later, under a name that may shadow an allowed command.
    #[error("function definitions ('{0}()') are not supported")]
    FunctionDefinition(String),
    /// `$(( … ))` with anything but numbers and operators: names are evaluated recursively and
    /// array subscripts in them run command substitutions.
    #[error("arithmetic other than on plain numbers is not supported")]
    Arithmetic,
    /// A `${…}` form whose effect depends on variable contents or on quoting rules that differ
    /// inside double quotes.
    #[error("{0} in ${{…}} are not supported")]
    Parameter(&'static str),
    /// `$"…"`: translated through a message catalogue.
    #[error("$\"…\" strings are not supported")]
    LocaleString,
    /// `` `… \` … \` …` ``.
    #[error("nested backquotes are not supported")]
    NestedBackquotes,
    /// More than [`MAX_WORDS`] words.
    #[error("more than {MAX_WORDS} words")]
    TooManyWords,
    /// Substitutions, subshells or groups nested deeper than [`MAX_DEPTH`].
    #[error("nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// `{a[i]}>file`: bash stores the new descriptor in an array element, evaluating its
    /// subscript.
    #[error("redirections that store a descriptor in an array element ('{0}') are not supported")]
    VarRedirection(String),
    /// bash stops reading an argument at a NUL, so what follows would not run as written.
    #[error("NUL characters are not supported")]
    Nul,
}

/// Reads `line` as bash would and returns its simple commands, or the first reason for doubt
/// together with what was read before it.
pub fn parse(line: &str) -> Parse {
    if line.contains('\0') {
        return Parse { commands: Vec::new(), error: Some(ParseError::Nul) };
    }
    let mut parser = Parser::new(line, 0);
    let error = parser.list(End::Eof).err();
    Parse { commands: parser.commands, error }
}

/// The simple commands `line` runs, or why that cannot be told for certain.
pub fn commands(line: &str) -> Result<Vec<SimpleCommand>, ParseError> {
    let parse = parse(line);
    match parse.error {
        None => Ok(parse.commands),
        Some(error) => Err(error),
    }
}

// === impl SimpleCommand ===

impl SimpleCommand {
    /// The command word, if the command has one.
    pub fn name(&self) -> Option<&Word> {
        self.words.first()
    }

    /// The words after the command word.
    pub fn args(&self) -> &[Word] {
        self.words.get(1..).unwrap_or(&[])
    }
}

impl fmt::Display for SimpleCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let words = self.assignments.iter().map(String::as_str).chain(self.words.iter().map(|w| w.raw.as_str()));
        for word in words {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(word)?;
            first = false;
        }
        Ok(())
    }
}

// === impl Redirection ===

impl Redirection {
    /// The file this redirection may create, truncate or change, if it may: the target of
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `<>`, and of `>&` unless that target is a descriptor
    /// (`>&2`, `>&2-`) or `-` (close). Input (`<`, `<&`, `<<<`) writes nothing.
    ///
    /// A `>&` target counts as a descriptor only when its text is certain and is a number that
    /// fits a C `int`, so `>&$fd` and `>&99999999999` count as files.
    pub fn written(&self) -> Option<&Word> {
        match self.op {
            "<" | "<&" | "<<<" => None,
            ">&" if self.target.literal().is_some_and(is_descriptor) => None,
            _ => Some(&self.target),
        }
    }
}

/// Whether the target of `>&` names a descriptor to copy, move (`2-`) or close (`-`).
fn is_descriptor(target: &str) -> bool {
    let digits = target.strip_suffix('-').unwrap_or(target);
    target == "-" || fits_int(digits)
}

/// Whether `digits` is a non-empty run of ASCII digits whose value fits a C `int`, the test
/// bash 5.2 applies before it reads a number as a file descriptor (`legal_number`, then
/// `(int)value == value`). Leading zeros do not count: `0002` is 2.
pub fn fits_int(digits: &str) -> bool {
    let significant = digits.trim_start_matches('0');
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (significant.len() < 10 || (significant.len() == 10 && significant <= "2147483647"))
}

// === impl Word ===

impl Word {
    /// The certain text of the word, if it has one.
    pub fn literal(&self) -> Option<&str> {
        self.value.as_deref()
    }
}

impl fmt::Display for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

// === Parser ===

/// What closes the list being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The end of the input.
    Eof,
    /// A `)`, closing what the label names.
    Paren(&'static str),
    /// The keyword `}`.
    Brace,
}

/// A word being built: its text so far, and whether that text is still certain.
#[derive(Default)]
struct Text {
    value: String,
    literal: bool,
    quoted: bool,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    /// Words read so far, including those of enclosing parsers (see [`MAX_WORDS`]).
    words: usize,
    depth: usize,
    commands: Vec<SimpleCommand>,
}

/// Characters that end an unquoted word.
fn is_metachar(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>')
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `raw` without its `\\`-newline line continuations, borrowed when it has none.
fn without_continuations(raw: &str) -> Cow<'_, str> {
    if raw.contains("\\\n") { Cow::Owned(raw.replace("\\\n", "")) } else { Cow::Borrowed(raw) }
}

/// Whether `s` is a shell variable name: a letter or `_`, then letters, digits or `_`.
pub fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_name_start) && chars.all(is_name_char)
}

impl Parser {
    fn new(text: &str, depth: usize) -> Self {
        Parser { chars: text.chars().collect(), pos: 0, words: 0, depth, commands: Vec::new() }
    }

    // --- characters ---
    //
    // bash removes `\`-newline pairs as it reads input, except inside single quotes, `$'…'`,
    // comments and right after a backslash that escapes the next character. `peek`, `peek_at`
    // and `bump` read through the pairs; `bump_raw` reads the next character as it is.

    /// The index of the `n`th character from `at`, skipping line continuations. It reads
    /// every character up to there, so callers only ask for small `n` (at most 4), and a run
    /// of continuations is crossed a bounded number of times from each side; longer scans go
    /// through [`Parser::scan`], which reads each character once.
    fn index(&self, mut at: usize, mut n: usize) -> Option<usize> {
        loop {
            while self.chars.get(at) == Some(&'\\') && self.chars.get(at + 1) == Some(&'\n') {
                at += 2;
            }
            if at >= self.chars.len() {
                return None;
            }
            if n == 0 {
                return Some(at);
            }
            at += 1;
            n -= 1;
        }
    }

    /// From `at`, skips characters (through line continuations) while `keep` holds; returns
    /// how many were skipped and the index of the first one that does not, if any.
    fn scan(&self, at: usize, keep: impl Fn(char) -> bool) -> (usize, Option<usize>) {
        let mut count = 0;
        let mut next = self.index(at, 0);
        while let Some(i) = next.filter(|&i| keep(self.chars[i])) {
            count += 1;
            next = self.index(i + 1, 0);
        }
        (count, next)
    }

    fn peek(&self) -> Option<char> {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.index(self.pos, n).map(|i| self.chars[i])
    }

    fn bump(&mut self) -> Option<char> {
        let i = self.index(self.pos, 0)?;
        self.pos = i + 1;
        Some(self.chars[i])
    }

    fn bump_raw(&mut self) -> Option<char> {
        let c = self.chars.get(self.pos).copied()?;
        self.pos += 1;
        Some(c)
    }

    fn text_since(&self, start: usize) -> String {
        self.chars[start..self.pos].iter().collect()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    /// Skips blanks and a comment, up to (not over) the newline that ends it.
    fn skip_blanks_and_comment(&mut self) {
        self.skip_blanks();
        if self.peek() == Some('#') {
            while self.chars.get(self.pos).is_some_and(|&c| c != '\n') {
                self.pos += 1;
            }
        }
    }

    /// Skips blanks, comments and newlines: where a command may start after an operator.
    fn skip_space(&mut self) {
        loop {
            self.skip_blanks_and_comment();
            if self.peek() != Some('\n') {
                return;
            }
            self.bump();
        }
    }

    /// Whether the next word is exactly the unquoted keyword `word`.
    fn at_keyword(&self, word: &str) -> bool {
        let len = word.chars().count();
        word.chars().enumerate().all(|(n, c)| self.peek_at(n) == Some(c)) && self.peek_at(len).is_none_or(is_metachar)
    }

    /// Whether a file descriptor number followed by a redirection operator comes next.
    ///
    /// As bash 5.2's reader: ASCII digits ending right before `<` or `>` (not `<(` or `>(`,
    /// which continue the word), whose value fits a C `int`. A larger number is an ordinary
    /// word: `2147483648>x` runs a command named `2147483648` with its output in `x`.
    fn at_fd_redirection(&self) -> bool {
        let (count, next) = self.scan(self.pos, |c| c.is_ascii_digit());
        let Some(op) = next.filter(|&i| count > 0 && matches!(self.chars[i], '<' | '>')) else { return false };
        self.index(op + 1, 0).map(|i| self.chars[i]) != Some('(') && fits_int(&self.peek_digits())
    }

    /// The digits that come next, through line continuations, without reading them.
    fn peek_digits(&self) -> String {
        let mut digits = String::new();
        let mut next = self.index(self.pos, 0);
        while let Some(i) = next.filter(|&i| self.chars[i].is_ascii_digit()) {
            digits.push(self.chars[i]);
            next = self.index(i + 1, 0);
        }
        digits
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, ParseError>) -> Result<T, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    // --- grammar ---

    /// A list of and-or lists up to `end`; returns how many it read.
    fn list(&mut self, end: End) -> Result<usize, ParseError> {
        let mut count = 0;
        loop {
            self.skip_space();
            match (self.peek(), end) {
                (None, End::Eof) => return Ok(count),
                (None, End::Paren(what)) => return Err(ParseError::Unterminated(what)),
                (None, End::Brace) => return Err(ParseError::Unterminated("brace group")),
                (Some(')'), End::Paren(_)) => {
                    self.bump();
                    return Ok(count);
                }
                (Some('}'), End::Brace) if self.at_keyword("}") => {
                    self.bump();
                    return Ok(count);
                }
                _ => {}
            }
            self.and_or()?;
            count += 1;
            self.skip_blanks_and_comment();
            match self.peek() {
                None | Some('\n') => {}
                Some(';') => {
                    self.bump();
                    if let Some(c @ (';' | '&')) = self.peek() {
                        return Err(ParseError::Unexpected(format!(";{c}")));
                    }
                }
                Some('&') => {
                    self.bump();
                }
                Some(')') if matches!(end, End::Paren(_)) => {}
                Some(c) => return Err(ParseError::Unexpected(c.to_string())),
            }
        }
    }

    fn and_or(&mut self) -> Result<(), ParseError> {
        self.pipeline()?;
        loop {
            self.skip_blanks_and_comment();
            match (self.peek(), self.peek_at(1)) {
                (Some('&'), Some('&')) | (Some('|'), Some('|')) => {
                    self.bump();
                    self.bump();
                }
                _ => return Ok(()),
            }
            self.skip_space();
            self.pipeline()?;
        }
    }

    fn pipeline(&mut self) -> Result<(), ParseError> {
        self.timed_command()?;
        loop {
            self.skip_blanks_and_comment();
            if self.peek() != Some('|') || self.peek_at(1) == Some('|') {
                return Ok(());
            }
            self.bump();
            if self.peek() == Some('&') {
                self.bump();
            }
            self.skip_space();
            self.command()?;
        }
    }

    /// The first command of a pipeline. Only there does bash 5.2 take `time` as the keyword
    /// that times the pipeline after it (with `-p`, then `--`, as its own options); after a
    /// `|`, a quote, a backslash or a redirection, `time` is the external program, which runs
    /// its arguments. A `time` with nothing after it times nothing.
    fn timed_command(&mut self) -> Result<(), ParseError> {
        self.skip_blanks();
        if !self.at_keyword("time") {
            return self.command();
        }
        while self.at_keyword("time") {
            self.bump_word("time");
            self.skip_blanks();
            if self.at_keyword("-p") {
                self.bump_word("-p");
                self.skip_blanks();
            }
            if self.at_keyword("--") {
                self.bump_word("--");
                self.skip_blanks();
            }
        }
        match self.peek() {
            None | Some(';' | '\n' | '#') => Ok(()),
            Some(_) => self.command(),
        }
    }

    /// Reads `word`, which [`Parser::at_keyword`] found next.
    fn bump_word(&mut self, word: &str) {
        for _ in word.chars() {
            self.bump();
        }
    }

    fn command(&mut self) -> Result<(), ParseError> {
        self.skip_blanks();
        match self.peek() {
            None => Err(ParseError::MissingCommand),
            Some('(') if self.peek_at(1) == Some('(') => Err(ParseError::Keyword("((".to_owned())),
            Some('(') => {
                self.bump();
                if self.nested(|p| p.list(End::Paren("subshell")))? == 0 {
                    return Err(ParseError::Unexpected(")".to_owned()));
                }
                self.trailing_redirections()
            }
            Some('{') if self.at_keyword("{") => {
                self.bump();
                if self.nested(|p| p.list(End::Brace))? == 0 {
                    return Err(ParseError::Unexpected("}".to_owned()));
                }
                self.trailing_redirections()
            }
            Some(c @ (')' | ';' | '&' | '|' | '\n')) => {
                Err(ParseError::Unexpected(if c == '\n' { "newline".to_owned() } else { c.to_string() }))
            }
            Some(_) => self.simple_command(),
        }
    }

    /// Redirections after a subshell or a brace group; they apply to the whole group, and are
    /// kept as a command made only of redirections.
    fn trailing_redirections(&mut self) -> Result<(), ParseError> {
        let mut redirections = Vec::new();
        let result = loop {
            self.skip_blanks();
            let redirection = if self.at_fd_redirection() {
                let fd = self.digits();
                self.redirection(Some(fd))
            } else if self.at_redirection() {
                self.redirection(None)
            } else {
                break Ok(());
            };
            match redirection {
                Ok(redirection) => redirections.push(redirection),
                Err(e) => break Err(e),
            }
        };
        if !redirections.is_empty() {
            self.commands.push(SimpleCommand { redirections, ..SimpleCommand::default() });
        }
        result
    }

    fn simple_command(&mut self) -> Result<(), ParseError> {
        let mut command = SimpleCommand::default();
        let result = self.simple_command_into(&mut command);
        if command != SimpleCommand::default() {
            self.commands.push(command);
        }
        result
    }

    fn simple_command_into(&mut self, command: &mut SimpleCommand) -> Result<(), ParseError> {
        loop {
            self.skip_blanks();
            match self.peek() {
                None | Some(';' | '|' | '\n' | ')' | '#') => break,
                Some('&') if self.peek_at(1) != Some('>') => break,
                Some('(') => {
                    return Err(match command.words.as_slice() {
                        [name] if command.assignments.is_empty() && self.empty_parens_follow() => {
                            ParseError::FunctionDefinition(name.raw.clone())
                        }
                        _ => ParseError::Unexpected("(".to_owned()),
                    });
                }
                Some(_) if self.at_fd_redirection() => {
                    let fd = self.digits();
                    let redirection = self.redirection(Some(fd))?;
                    command.redirections.push(redirection);
                }
                Some(_) if self.at_redirection() => {
                    let redirection = self.redirection(None)?;
                    command.redirections.push(redirection);
                }
                Some(_) => {
                    let (word, assignment) = self.word()?;
                    if let Some(name) = self.var_redirection(&word)? {
                        let redirection = self.redirection(Some(format!("{{{name}}}")))?;
                        command.redirections.push(redirection);
                        continue;
                    }
                    if assignment && command.words.is_empty() {
                        command.assignments.push(word.raw);
                        continue;
                    }
                    // bash removes line continuations before it looks for keywords.
                    if command.words.is_empty() && !word.quoted {
                        let bare = without_continuations(&word.raw);
                        if KEYWORDS.contains(&bare.as_ref()) {
                            return Err(ParseError::Keyword(bare.into_owned()));
                        }
                    }
                    command.words.push(word);
                }
            }
        }
        // Most commands have a word or two; a command list of many thousands of them must
        // not hold four times that.
        command.words.shrink_to_fit();
        if *command == SimpleCommand::default() {
            return Err(match self.peek() {
                None => ParseError::MissingCommand,
                Some('\n') => ParseError::Unexpected("newline".to_owned()),
                Some(c) => ParseError::Unexpected(c.to_string()),
            });
        }
        Ok(())
    }

    /// After `name`, whether `( )` follows: a function definition rather than a stray `(`.
    fn empty_parens_follow(&self) -> bool {
        let Some(open) = self.index(self.pos, 0) else { return false };
        let (_, next) = self.scan(open + 1, |c| matches!(c, ' ' | '\t'));
        next.is_some_and(|i| self.chars[i] == ')')
    }

    /// After `word`, whether it is bash's `{name}` prefix of a redirection (`{fd}>file`, which
    /// opens a new descriptor and stores its number in `fd`): a word from `{` to `}` right
    /// before `<` or `>`. Returns the name. An array element (`{a[i]}`), whose subscript bash
    /// evaluates, is refused; any other such word is an ordinary word, as in bash.
    fn var_redirection(&self, word: &Word) -> Result<Option<String>, ParseError> {
        if !matches!(self.peek(), Some('<' | '>')) || !self.at_redirection() {
            return Ok(None);
        }
        let bare = without_continuations(&word.raw);
        let Some(inner) = bare.strip_prefix('{').and_then(|rest| rest.strip_suffix('}')) else { return Ok(None) };
        if is_name(inner) {
            Ok(Some(inner.to_owned()))
        } else if inner.contains('[') {
            Err(ParseError::VarRedirection(bare.into_owned()))
        } else {
            Ok(None)
        }
    }

    /// Whether a redirection operator (not a process substitution) comes next.
    fn at_redirection(&self) -> bool {
        match (self.peek(), self.peek_at(1)) {
            (Some('<' | '>'), Some('(')) => false,
            (Some('<' | '>'), _) => true,
            (Some('&'), Some('>')) => true,
            _ => false,
        }
    }

    fn digits(&mut self) -> String {
        let mut digits = String::new();
        while let Some(c) = self.peek().filter(char::is_ascii_digit) {
            digits.push(c);
            self.bump();
        }
        digits
    }

    fn redirection(&mut self, fd: Option<String>) -> Result<Redirection, ParseError> {
        let op = match (self.peek(), self.peek_at(1), self.peek_at(2)) {
            (Some('<'), Some('<'), Some('<')) => "<<<",
            (Some('<'), Some('<'), _) => return Err(ParseError::HereDocument),
            (Some('<'), Some('&'), _) => "<&",
            (Some('<'), Some('>'), _) => "<>",
            (Some('<'), _, _) => "<",
            (Some('>'), Some('>'), _) => ">>",
            (Some('>'), Some('&'), _) => ">&",
            (Some('>'), Some('|'), _) => ">|",
            (Some('>'), _, _) => ">",
            (Some('&'), Some('>'), Some('>')) => "&>>",
            (Some('&'), Some('>'), _) => "&>",
            _ => return Err(ParseError::MissingTarget),
        };
        for _ in 0..op.len() {
            self.bump();
        }
        self.skip_blanks();
        let starts_word = match self.peek() {
            None | Some('#') => false,
            Some('<' | '>') => self.peek_at(1) == Some('('),
            Some(c) => !is_metachar(c),
        };
        if !starts_word {
            return Err(ParseError::MissingTarget);
        }
        let (target, _) = self.word()?;
        Ok(Redirection { fd, op, target })
    }

    // --- words ---

    /// Reads one word; the flag says whether it has the form of an assignment.
    fn word(&mut self) -> Result<(Word, bool), ParseError> {
        self.words += 1;
        if self.words > MAX_WORDS {
            return Err(ParseError::TooManyWords);
        }
        let start = self.pos;
        let mut text = Text { literal: true, ..Text::default() };
        let mut assignment = false;
        let mut seen_equals = false;
        let mut bracket = None;
        while let Some(c) = self.peek() {
            match c {
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.bump();
                    self.bump();
                    self.nested(|p| p.substitution("process substitution"))?;
                    text.literal = false;
                }
                c if is_metachar(c) => break,
                '\'' => {
                    self.bump();
                    text.quoted = true;
                    loop {
                        match self.bump_raw() {
                            None => return Err(ParseError::Unterminated("single quote")),
                            Some('\'') => break,
                            Some(c) => text.value.push(c),
                        }
                    }
                }
                '"' => {
                    self.bump();
                    text.quoted = true;
                    self.double_quoted(&mut text)?;
                }
                '\\' => {
                    self.bump();
                    text.quoted = true;
                    // A backslash at the very end stays a backslash.
                    text.value.push(self.bump_raw().unwrap_or('\\'));
                }
                '$' => self.dollar(&mut text, false)?,
                '`' => {
                    self.bump();
                    self.backquote(false)?;
                    text.literal = false;
                }
                '*' | '?' | '{' | '}' => {
                    self.bump();
                    text.value.push(c);
                    text.literal = false;
                }
                // A `[` is a glob only with a `]` after it; `[` alone (the test command) is text.
                '[' => {
                    self.bump();
                    bracket.get_or_insert(text.value.len());
                    text.value.push(c);
                }
                '~' if text.value.is_empty() && !text.quoted && text.literal => {
                    self.bump();
                    text.value.push(c);
                    text.literal = false;
                }
                '=' if !seen_equals => {
                    seen_equals = true;
                    let name = text.value.strip_suffix('+').unwrap_or(&text.value);
                    assignment = !text.quoted && text.literal && is_name(name);
                    self.bump();
                    text.value.push(c);
                }
                _ => {
                    self.bump();
                    text.value.push(c);
                }
            }
        }
        if bracket.is_some_and(|at| text.value[at..].contains(']')) {
            text.literal = false;
        }
        let word = Word { raw: self.text_since(start), value: text.literal.then_some(text.value), quoted: text.quoted };
        Ok((word, assignment))
    }

    /// The inside of `"…"`, after the opening quote.
    fn double_quoted(&mut self, text: &mut Text) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                None => return Err(ParseError::Unterminated("double quote")),
                Some('"') => {
                    self.bump();
                    return Ok(());
                }
                Some('\\') => {
                    self.bump();
                    match self.bump_raw() {
                        None => return Err(ParseError::Unterminated("double quote")),
                        Some(c @ ('$' | '`' | '"' | '\\')) => text.value.push(c),
                        Some(c) => {
                            text.value.push('\\');
                            text.value.push(c);
                        }
                    }
                }
                Some('$') => self.dollar(text, true)?,
                Some('`') => {
                    self.bump();
                    self.backquote(true)?;
                    text.literal = false;
                }
                Some(c) => {
                    self.bump();
                    text.value.push(c);
                }
            }
        }
    }

    /// A `$` and what it introduces.
    fn dollar(&mut self, text: &mut Text, in_double_quotes: bool) -> Result<(), ParseError> {
        self.bump();
        text.literal = false;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.bump();
                self.bump();
                self.arithmetic()
            }
            Some('(') => {
                self.bump();
                self.nested(|p| p.substitution("command substitution"))
            }
            Some('{') => {
                self.bump();
                self.nested(|p| p.parameter(in_double_quotes))
            }
            // `$[ … ]`, the old arithmetic: bash reads quotes in it as characters, so a `$(…)`
            // between single quotes runs.
            Some('[') => Err(ParseError::Arithmetic),
            Some('\'') if !in_double_quotes => {
                self.bump();
                // `$'…'`: only `\` escapes, and only `'` ends it. Its text stays unknown.
                loop {
                    match self.bump_raw() {
                        None => return Err(ParseError::Unterminated("$'…' string")),
                        Some('\'') => return Ok(()),
                        Some('\\') => {
                            self.bump_raw();
                        }
                        Some(_) => {}
                    }
                }
            }
            Some('"') if !in_double_quotes => Err(ParseError::LocaleString),
            Some(c) if is_name_start(c) => {
                while self.peek().is_some_and(is_name_char) {
                    self.bump();
                }
                Ok(())
            }
            Some(c) if c.is_ascii_digit() || "@*#?-$!".contains(c) => {
                self.bump();
                Ok(())
            }
            // A lone `$` stands for itself; the word is still treated as uncertain.
            _ => {
                text.value.push('$');
                Ok(())
            }
        }
    }

    /// `$( … )` or `<( … )` after its opening parenthesis.
    fn substitution(&mut self, what: &'static str) -> Result<(), ParseError> {
        self.list(End::Paren(what)).map(drop)
    }

    /// `` `…` `` after the opening backquote: the text is unescaped as bash does, then read as
    /// a command line of its own.
    fn backquote(&mut self, in_double_quotes: bool) -> Result<(), ParseError> {
        let mut inner = String::new();
        loop {
            match self.bump_raw() {
                None => return Err(ParseError::Unterminated("backquote")),
                Some('`') => break,
                Some('\\') => match self.bump_raw() {
                    None => return Err(ParseError::Unterminated("backquote")),
                    Some('`') => return Err(ParseError::NestedBackquotes),
                    Some(c @ ('$' | '\\')) => inner.push(c),
                    Some('"') if in_double_quotes => inner.push('"'),
                    Some(c) => {
                        inner.push('\\');
                        inner.push(c);
                    }
                },
                Some(c) => inner.push(c),
            }
        }
        let mut parser = Parser::new(&inner, self.depth);
        parser.words = self.words;
        let result = parser.nested(|p| p.list(End::Eof));
        self.words = parser.words;
        self.commands.append(&mut parser.commands);
        result.map(drop)
    }

    /// `$(( … ))` after `$((`: accepted only over numbers, operators and parentheses.
    fn arithmetic(&mut self) -> Result<(), ParseError> {
        let mut depth = 0usize;
        loop {
            match self.bump() {
                None => return Err(ParseError::Unterminated("arithmetic expansion")),
                Some('(') => depth += 1,
                Some(')') if depth > 0 => depth -= 1,
                Some(')') => {
                    return match self.bump() {
                        Some(')') => Ok(()),
                        _ => Err(ParseError::Arithmetic),
                    };
                }
                Some(c) if c.is_ascii_digit() || " \t\n+-*/%<>=!&|^~?:,".contains(c) => {}
                Some(_) => return Err(ParseError::Arithmetic),
            }
        }
    }

    /// `${ … }` after `${`.
    fn parameter(&mut self, in_double_quotes: bool) -> Result<(), ParseError> {
        match self.peek() {
            Some('!') => return Err(ParseError::Parameter("indirections (!)")),
            Some('#') if self.peek_at(1) == Some('}') => {
                self.bump();
                self.bump();
                return Ok(());
            }
            Some('#') => {
                self.bump();
                if !self.name() {
                    return Err(ParseError::Parameter("unusual forms"));
                }
                return match self.bump() {
                    Some('}') => Ok(()),
                    Some('[') => Err(ParseError::Parameter("array subscripts")),
                    _ => Err(ParseError::Parameter("unusual forms")),
                };
            }
            Some(c) if "@*?-$0".contains(c) => {
                self.bump();
            }
            _ => {
                if !self.name() {
                    return Err(ParseError::Parameter("unusual forms"));
                }
            }
        }
        let Some(op) = self.bump() else { return Err(ParseError::Unterminated("${…} expansion")) };
        match op {
            '}' => return Ok(()),
            '[' => return Err(ParseError::Parameter("array subscripts")),
            '@' => return Err(ParseError::Parameter("transformations (@)")),
            ':' => match self.peek() {
                Some('-' | '=' | '?' | '+') => {
                    self.bump();
                }
                _ => return Err(ParseError::Parameter("substrings")),
            },
            '-' | '=' | '?' | '+' => {}
            '#' | '%' | '^' | ',' => {
                if self.peek() == Some(op) {
                    self.bump();
                }
            }
            '/' => {
                if let Some('/' | '#' | '%') = self.peek() {
                    self.bump();
                }
            }
            _ => return Err(ParseError::Parameter("unusual forms")),
        }
        self.parameter_word(in_double_quotes)
    }

    /// A parameter name, a number, or nothing (false).
    fn name(&mut self) -> bool {
        match self.peek() {
            Some(c) if is_name_start(c) => {
                while self.peek().is_some_and(is_name_char) {
                    self.bump();
                }
                true
            }
            Some(c) if c.is_ascii_digit() => {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.bump();
                }
                true
            }
            _ => false,
        }
    }

    /// The word of `${name op word}`, up to the closing brace.
    fn parameter_word(&mut self, in_double_quotes: bool) -> Result<(), ParseError> {
        // Its text never matters: the whole word is uncertain. Only its extent and the
        // substitutions in it do.
        let mut scratch = Text::default();
        loop {
            match self.peek() {
                None => return Err(ParseError::Unterminated("${…} expansion")),
                Some('}') => {
                    self.bump();
                    return Ok(());
                }
                // Inside double quotes bash keeps these single quotes as characters, so a
                // `$(…)` between them runs; outside it they quote. Refuse rather than guess.
                Some('\'') => return Err(ParseError::Parameter("single quotes")),
                Some('{') => return Err(ParseError::Parameter("nested braces")),
                Some('\\') => {
                    self.bump();
                    if self.bump_raw().is_none() {
                        return Err(ParseError::Unterminated("${…} expansion"));
                    }
                }
                Some('"') => {
                    self.bump();
                    self.double_quoted(&mut scratch)?;
                }
                // Read as inside double quotes: `$'` and `$"` are then a `$` and a quote, which
                // the arms above handle.
                Some('$') => self.dollar(&mut scratch, true)?,
                Some('`') => {
                    self.bump();
                    self.backquote(in_double_quotes)?;
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
    }
}
