//! Tool globs matched exactly as Inspect's `policy_approver` matches them.
//!
//! Inspect splits every `tools` entry on commas, strips the pieces (Python's `str.strip`),
//! drops empty ones, appends `*` unless a piece already ends with one, and matches the
//! rendered call with `fnmatch.fnmatch`: whole-string, case-sensitive, `*` and `?` crossing
//! newlines, `[...]` classes with Python's quirks (`!` negates, a leading `]` is literal, an
//! unclosed `[` is a literal `[`, empty ranges vanish).
//!
//! Each piece is parsed into tokens the way `fnmatch.translate` reads it, then split at
//! its stars into fixed-length segments. A glob matches when its first segment matches at
//! the start, its last at the end, and every other segment is found, leftmost first, in
//! order between them: the classic glob algorithm, exact for fnmatch's semantics. Literal
//! segments are found with SIMD substring search; segments with `?` or a class compare one
//! character (not byte) at a time, as Python does. (globset is not used: it matches bytes,
//! so its `?` and `[é]` do not match one non-ASCII character, and its multi-glob regex scans
//! the whole call for every glob with inner stars.)

use memchr::memmem::Finder;

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
    /// For each step, its globs.
    steps: Vec<Vec<Glob>>,
}

impl ToolMatcher {
    /// Compiles the expanded globs of every step, in step order.
    pub fn new(steps: &[Vec<String>]) -> Result<Self, GlobError> {
        let steps = steps
            .iter()
            .map(|globs| {
                globs
                    .iter()
                    .filter_map(|glob| match tokenize(glob) {
                        Ok(Some(tokens)) => Some(Ok(Glob::new(&tokens))),
                        Ok(None) => None,
                        Err(reason) => Some(Err(GlobError { glob: glob.clone(), reason })),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        Ok(ToolMatcher { steps })
    }

    /// Whether any glob of step `step` matches the rendered call.
    pub fn step_matches(&self, step: usize, rendered: &str) -> bool {
        self.steps[step].iter().any(|glob| glob.is_match(rendered))
    }

    /// The steps, in order, whose globs match the rendered call.
    pub fn matching_steps(&self, rendered: &str) -> Vec<usize> {
        (0..self.steps.len()).filter(|&step| self.step_matches(step, rendered)).collect()
    }
}

/// One glob matched against a whole text, as `fnmatch.fnmatch` matches it: no `*` is
/// appended, so a glob without stars matches exactly one text.
#[derive(Debug, Clone)]
pub struct WholeGlob {
    /// `None` for a glob that can never match (an empty range).
    glob: Option<Glob>,
}

impl WholeGlob {
    /// Compiles `glob`, as Python would.
    pub fn new(glob: &str) -> Result<Self, GlobError> {
        let tokens = tokenize(glob).map_err(|reason| GlobError { glob: glob.to_owned(), reason })?;
        Ok(WholeGlob { glob: tokens.map(|tokens| Glob::new(&tokens)) })
    }

    /// Whether the glob matches the whole of `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.glob.as_ref().is_some_and(|glob| glob.is_match(text))
    }
}

/// A glob that matches `text` and nothing else: each of fnmatch's special characters
/// (`*`, `?`, `[`) becomes a one-character class (`[*]`, `[?]`, `[[]`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '*' => out.push_str("[*]"),
            '?' => out.push_str("[?]"),
            '[' => out.push_str("[[]"),
            c => out.push(c),
        }
    }
    out
}

/// One compiled glob: fixed-length segments separated by stars.
#[derive(Debug, Clone)]
struct Glob {
    segments: Vec<Segment>,
    leading_star: bool,
    trailing_star: bool,
}

/// A run of tokens between stars; each token matches exactly one character.
// Built once per policy and read on every call: the literal's finder stays inline.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Segment {
    /// Only literal characters: compared and searched as bytes.
    Literal { text: String, finder: Finder<'static> },
    /// With `?` or classes: compared character by character.
    Chars(Vec<Token>),
}

impl Glob {
    fn new(tokens: &[Token]) -> Self {
        let segments = tokens.split(|t| *t == Token::Star).filter(|run| !run.is_empty()).map(Segment::new).collect();
        Glob {
            segments,
            leading_star: tokens.first() == Some(&Token::Star),
            trailing_star: tokens.last() == Some(&Token::Star),
        }
    }

    fn is_match(&self, text: &str) -> bool {
        let mut segments = self.segments.as_slice();
        if !self.leading_star && !self.trailing_star && segments.len() <= 1 {
            return match segments.first() {
                None => text.is_empty(),
                Some(only) => only.match_at(text, 0) == Some(text.len()),
            };
        }
        let mut pos = 0;
        if !self.leading_star {
            let Some((first, rest)) = segments.split_first() else { return true };
            match first.match_at(text, 0) {
                Some(end) => pos = end,
                None => return false,
            }
            segments = rest;
        }
        let mut last = None;
        if !self.trailing_star
            && let Some((tail, rest)) = segments.split_last()
        {
            last = Some(tail);
            segments = rest;
        }
        for segment in segments {
            match segment.find(text, pos) {
                Some(end) => pos = end,
                None => return false,
            }
        }
        match last {
            None => true,
            Some(tail) => tail.match_suffix(text, pos),
        }
    }
}

impl Segment {
    fn new(tokens: &[Token]) -> Self {
        let literal: Option<String> =
            tokens.iter().map(|t| if let Token::Literal(c) = t { Some(*c) } else { None }).collect();
        match literal {
            Some(text) => Segment::Literal { finder: Finder::new(text.as_bytes()).into_owned(), text },
            None => Segment::Chars(tokens.to_vec()),
        }
    }

    /// The end of this segment matched at `pos`, if it matches there.
    fn match_at(&self, text: &str, pos: usize) -> Option<usize> {
        match self {
            Segment::Literal { text: literal, .. } => {
                text[pos..].starts_with(literal.as_str()).then_some(pos + literal.len())
            }
            Segment::Chars(tokens) => {
                let mut chars = text[pos..].char_indices();
                for token in tokens {
                    let (_, c) = chars.next()?;
                    if !token.matches(c) {
                        return None;
                    }
                }
                Some(chars.next().map_or(text.len(), |(offset, _)| pos + offset))
            }
        }
    }

    /// The end of the leftmost match at or after `pos`.
    fn find(&self, text: &str, pos: usize) -> Option<usize> {
        match self {
            Segment::Literal { text: literal, finder } => {
                finder.find(&text.as_bytes()[pos..]).map(|at| pos + at + literal.len())
            }
            Segment::Chars(_) => text[pos..].char_indices().find_map(|(offset, _)| self.match_at(text, pos + offset)),
        }
    }

    /// Whether this segment ends `text` without starting before `pos`.
    fn match_suffix(&self, text: &str, pos: usize) -> bool {
        match self {
            Segment::Literal { text: literal, .. } => {
                text.len() >= pos + literal.len() && text.ends_with(literal.as_str())
            }
            Segment::Chars(tokens) => match text[pos..].char_indices().rev().nth(tokens.len() - 1) {
                Some((offset, _)) => self.match_at(text, pos + offset) == Some(text.len()),
                None => false,
            },
        }
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

impl Token {
    /// Whether this one-character token matches `c`.
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Literal(l) => *l == c,
            Token::Any => true,
            Token::Class { negated, ranges } => ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated,
            Token::Star => unreachable!("stars separate segments"),
        }
    }
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
