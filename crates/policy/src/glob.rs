//! Tool globs matched exactly as Inspect's `policy_approver` matches them.
//!
//! Inspect splits every `tools` entry on commas, strips the pieces (Python's `str.strip`),
//! drops empty ones, appends `*` unless a piece already ends with one, and matches the
//! rendered call with `fnmatch.fnmatch`: whole-string, case-sensitive, `*` and `?` crossing
//! newlines, `[...]` classes with Python's quirks (`!` negates, a leading `]` is literal, an
//! unclosed `[` is a literal `[`, empty ranges vanish).
//!
//! Each piece is parsed into [`Token`]s the way `fnmatch.translate` reads it. Globs made of
//! literals and `*` go into one globset, which matches them together; globs with `?` or a
//! class become Unicode regexes, because globset matches bytes and its `?` or `[é]` would
//! not match one non-ASCII character as Python does.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;

/// A glob Python's `re` would refuse to compile (Inspect fails the sample on it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("bad glob '{glob}': {reason}")]
pub struct GlobError {
    /// The glob as written (after the `*` was appended).
    pub glob: String,
    /// Why it cannot be used.
    pub reason: String,
}

/// Splits `tools` entries into Inspect's globs: comma-separated, stripped, non-empty, `*`-ended.
pub fn expand_tools<'a>(specs: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    specs
        .into_iter()
        .flat_map(|spec| spec.split(','))
        .map(py_strip)
        .filter(|piece| !piece.is_empty())
        .map(|piece| if piece.ends_with('*') { piece.to_owned() } else { format!("{piece}*") })
        .collect()
}

/// Python's `str.strip()`: trims the characters `str.isspace` accepts, which include the
/// information separators U+001C..U+001F that Rust's `trim` keeps.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

fn is_py_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n'
            | '\u{b}'
            | '\u{c}'
            | '\r'
            | '\u{1c}'..='\u{1f}'
            | ' '
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// The globs of a whole chain, compiled once.
#[derive(Debug, Clone)]
pub struct ToolMatcher {
    set: GlobSet,
    /// For each glob in `set`, the index of the step it belongs to.
    owners: Vec<usize>,
    /// Globs with `?` or classes, with the index of their step.
    regexes: Vec<(Regex, usize)>,
}

impl ToolMatcher {
    /// Compiles the expanded globs of every step, in step order.
    pub fn new(steps: &[Vec<String>]) -> Result<Self, GlobError> {
        let mut builder = GlobSetBuilder::new();
        let mut owners = Vec::new();
        let mut regexes = Vec::new();
        for (step, globs) in steps.iter().enumerate() {
            for glob in globs {
                let error = |reason: String| GlobError { glob: glob.clone(), reason };
                let Some(tokens) = tokenize(glob).map_err(error)? else { continue };
                if tokens.iter().all(|t| matches!(t, Token::Literal(_) | Token::Star)) {
                    let compiled = GlobBuilder::new(&globset_syntax(&tokens))
                        .literal_separator(false)
                        .backslash_escape(false)
                        .build()
                        .map_err(|e| error(e.to_string()))?;
                    builder.add(compiled);
                    owners.push(step);
                } else {
                    let regex = Regex::new(&regex_syntax(&tokens)).map_err(|e| error(e.to_string()))?;
                    regexes.push((regex, step));
                }
            }
        }
        let set = builder.build().map_err(|e| GlobError { glob: String::new(), reason: e.to_string() })?;
        Ok(ToolMatcher { set, owners, regexes })
    }

    /// The steps, in order and each once, whose globs match the rendered call.
    /// `scratch` is reused between calls to avoid allocating.
    pub fn matching_steps(&self, rendered: &str, scratch: &mut Vec<usize>, out: &mut Vec<usize>) {
        self.set.matches_into(rendered, scratch);
        out.clear();
        out.extend(scratch.iter().map(|&glob| self.owners[glob]));
        out.extend(self.regexes.iter().filter(|(regex, _)| regex.is_match(rendered)).map(|(_, step)| *step));
        out.sort_unstable();
        out.dedup();
    }
}

/// Checks one glob as Python would compile it; `Ok(false)` for a glob that can never match
/// (an empty range such as `[z-a]`, which fnmatch turns into a never-matching pattern).
pub fn check(glob: &str) -> Result<bool, GlobError> {
    tokenize(glob).map(|tokens| tokens.is_some()).map_err(|reason| GlobError { glob: glob.to_owned(), reason })
}

/// One element of an fnmatch glob.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A character that matches itself.
    Literal(char),
    /// `*`: any run of characters, newlines included.
    Star,
    /// `?` (or `[!]`): any one character.
    Any,
    /// `[...]`: one character in (or, negated, not in) the inclusive ranges.
    Class { negated: bool, ranges: Vec<(char, char)> },
}

/// Reads a glob as `fnmatch.translate` does; `None` for a glob that can never match.
fn tokenize(glob: &str) -> Result<Option<Vec<Token>>, String> {
    let pattern: Vec<char> = glob.chars().collect();
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        let c = pattern[i];
        i += 1;
        match c {
            '*' => {
                if tokens.last() != Some(&Token::Star) {
                    tokens.push(Token::Star);
                }
            }
            '?' => tokens.push(Token::Any),
            '[' => match class_end(&pattern, i) {
                None => tokens.push(Token::Literal('[')),
                Some(end) => {
                    let class = parse_class(&class_body(&pattern, i, end))?;
                    i = end + 1;
                    match class {
                        Class::Never => return Ok(None),
                        Class::Any => tokens.push(Token::Any),
                        Class::Set { negated, ranges } => tokens.push(Token::Class { negated, ranges }),
                    }
                }
            },
            c => tokens.push(Token::Literal(c)),
        }
    }
    Ok(Some(tokens))
}

/// Literals and stars in globset syntax: every character globset reads specially is
/// spelled as a one-character class.
fn globset_syntax(tokens: &[Token]) -> String {
    let mut out = String::with_capacity(tokens.len() + 8);
    for token in tokens {
        match token {
            Token::Star => out.push('*'),
            Token::Literal(c @ ('*' | '?' | '[' | ']' | '{' | '}' | ',')) => {
                out.push('[');
                out.push(*c);
                out.push(']');
            }
            Token::Literal(c) => out.push(*c),
            Token::Any | Token::Class { .. } => unreachable!("classes and `?` are matched by regex"),
        }
    }
    out
}

/// Any glob as an anchored Unicode regex in which `.` crosses newlines.
fn regex_syntax(tokens: &[Token]) -> String {
    let mut out = String::from("(?s)\\A");
    for token in tokens {
        match token {
            Token::Literal(c) => push_escaped(&mut out, *c),
            Token::Star => out.push_str(".*"),
            Token::Any => out.push('.'),
            Token::Class { negated, ranges } => {
                out.push('[');
                if *negated {
                    out.push('^');
                }
                for (lo, hi) in ranges {
                    push_escaped(&mut out, *lo);
                    if lo != hi {
                        out.push('-');
                        push_escaped(&mut out, *hi);
                    }
                }
                out.push(']');
            }
        }
    }
    out.push_str("\\z");
    out
}

/// A character that matches itself in a regex, inside a class or out.
fn push_escaped(out: &mut String, c: char) {
    if c.is_ascii_punctuation() || c == ' ' {
        out.push('\\');
    }
    out.push(c);
}

/// fnmatch's search for the `]` that closes a class opened just before `start`.
fn class_end(pattern: &[char], start: usize) -> Option<usize> {
    let mut j = start;
    if pattern.get(j) == Some(&'!') {
        j += 1;
    }
    if pattern.get(j) == Some(&']') {
        j += 1;
    }
    while j < pattern.len() && pattern[j] != ']' {
        j += 1;
    }
    (j < pattern.len()).then_some(j)
}

/// fnmatch's rewrite of a class body `pattern[start..end]` into the text of a Python regex
/// class (escaped backslashes, hyphens that are not ranges, set operators; empty ranges gone).
fn class_body(pattern: &[char], start: usize, end: usize) -> Vec<char> {
    let text: String = pattern[start..end].iter().collect();
    let escape = |s: &str| s.replace('\\', "\\\\");
    let body = if !text.contains('-') {
        escape(&text)
    } else {
        let mut chunks: Vec<String> = Vec::new();
        let mut i = start;
        let mut k = if pattern[start] == '!' { start + 2 } else { start + 1 };
        while let Some(dash) = (k..end).find(|&p| pattern[p] == '-') {
            chunks.push(pattern[i..dash].iter().collect());
            i = dash + 1;
            k = dash + 3;
        }
        let last: String = pattern[i..end].iter().collect();
        if last.is_empty() {
            chunks.last_mut().expect("a dash was found").push('-');
        } else {
            chunks.push(last);
        }
        for k in (1..chunks.len()).rev() {
            let prev_last = chunks[k - 1].chars().last();
            let next_first = chunks[k].chars().next();
            if let (Some(a), Some(b)) = (prev_last, next_first)
                && a > b
            {
                let mut merged: String = chunks[k - 1].chars().take(chunks[k - 1].chars().count() - 1).collect();
                merged.extend(chunks[k].chars().skip(1));
                chunks[k - 1] = merged;
                chunks.remove(k);
            }
        }
        chunks.iter().map(|s| escape(s).replace('-', "\\-")).collect::<Vec<_>>().join("-")
    };
    let mut out = Vec::with_capacity(body.len());
    for c in body.chars() {
        if matches!(c, '&' | '~' | '|') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A character class as Python's regex engine reads fnmatch's output.
#[derive(Debug, PartialEq)]
enum Class {
    /// `(?!)`: the glob can never match.
    Never,
    /// `.`: any one character.
    Any,
    /// A set of inclusive ranges, possibly negated.
    Set { negated: bool, ranges: Vec<(char, char)> },
}

/// Reads a class body as `sre_parse` does after fnmatch produced it.
fn parse_class(body: &[char]) -> Result<Class, String> {
    if body.is_empty() {
        return Ok(Class::Never);
    }
    if body == ['!'] {
        return Ok(Class::Any);
    }
    // fnmatch turns a leading `!` into `^` and escapes a leading `^` or `[`.
    let (negated, rest) = match body[0] {
        '!' => (true, &body[1..]),
        _ => (false, body),
    };
    // Tokens: (char, escaped). A closing `]` ends the class.
    let mut tokens: Vec<(char, bool)> = Vec::with_capacity(rest.len() + 2);
    let mut i = 0;
    if matches!(body[0], '^' | '[') {
        tokens.push((body[0], true));
        i = 1;
    }
    while i < rest.len() {
        if rest[i] == '\\' && i + 1 < rest.len() {
            tokens.push((rest[i + 1], true));
            i += 2;
        } else {
            tokens.push((rest[i], false));
            i += 1;
        }
    }
    tokens.push((']', false));

    let mut ranges = Vec::new();
    let mut t = 0;
    loop {
        let (this, this_escaped) = tokens[t];
        t += 1;
        if this == ']' && !this_escaped && !ranges.is_empty() {
            break;
        }
        if t < tokens.len() && tokens[t] == ('-', false) {
            let Some(&(that, that_escaped)) = tokens.get(t + 1) else {
                return Err("unterminated character set".into());
            };
            if that == ']' && !that_escaped {
                ranges.push((this, this));
                ranges.push(('-', '-'));
                break;
            }
            if that < this {
                return Err(format!("bad character range {this}-{that}"));
            }
            ranges.push((this, that));
            t += 2;
        } else {
            ranges.push((this, this));
        }
        if t >= tokens.len() {
            return Err("unterminated character set".into());
        }
    }
    Ok(Class::Set { negated, ranges })
}

#[cfg(test)]
mod tests;
