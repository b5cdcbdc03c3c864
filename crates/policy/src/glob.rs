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
//! character (not byte) at a time, as Python does, and the `?`s next to a star are skipped
//! rather than searched for. Every match spends from one [`Budget`] per evaluation
//! ([`MATCH_BUDGET`] steps), so a glob built to be slow stops instead of holding a worker.
//! (globset is not used: it matches bytes, so its `?` and `[é]` do not match one non-ASCII
//! character, and its multi-glob regex scans the whole call for every glob with inner stars.)

use memchr::memmem::Finder;

use crate::limits;

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

/// The work glob matching may do for one evaluation, in steps: one character compared, one
/// character skipped, or eight bytes of a literal searched. A glob of plain text and stars
/// costs about a step per eight bytes of the call, so a call of a megabyte is judged against
/// dozens of them; a glob built to be slow (a segment of classes searched through a long
/// argument) runs out of it in about 40 ms (`cargo bench -p airlock-policy --bench chain --
/// hostile`).
pub const MATCH_BUDGET: u64 = 10_000_000;

/// Matching ran past its [`Budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("matching the call against the policy's tools ran past its budget of {MATCH_BUDGET} steps")]
pub struct Exhausted;

/// What is left of a [`MATCH_BUDGET`], spent by every glob matched for one call.
#[derive(Debug, Clone)]
pub struct Budget {
    left: u64,
}

impl Budget {
    /// A budget of `steps`.
    pub fn new(steps: u64) -> Self {
        Budget { left: steps }
    }

    /// The budget of one evaluation, [`MATCH_BUDGET`].
    pub fn evaluation() -> Self {
        Budget::new(MATCH_BUDGET)
    }

    /// The steps not spent yet.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Spends `steps`; past the budget nothing is left, so every later match stops too.
    fn spend(&mut self, steps: usize) -> Result<(), Exhausted> {
        match self.left.checked_sub(steps as u64) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(Exhausted)
            }
        }
    }

    /// Charges a literal search that read `bytes` bytes.
    fn searched(&mut self, bytes: usize) -> Result<(), Exhausted> {
        self.spend(bytes / 8 + 1)
    }
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

    /// Whether any glob of step `step` matches the rendered call, within `budget`.
    pub fn step_matches(&self, step: usize, rendered: &str, budget: &mut Budget) -> Result<bool, Exhausted> {
        for glob in &self.steps[step] {
            if glob.is_match(rendered, budget)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The steps, in order, whose globs match the rendered call, within `budget`.
    pub fn matching_steps(&self, rendered: &str, budget: &mut Budget) -> Result<Vec<usize>, Exhausted> {
        let mut matching = Vec::new();
        for step in 0..self.steps.len() {
            if self.step_matches(step, rendered, budget)? {
                matching.push(step);
            }
        }
        Ok(matching)
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

    /// Whether the glob matches the whole of `text`; a match that runs past
    /// [`MATCH_BUDGET`] is no match.
    pub fn is_match(&self, text: &str) -> bool {
        self.glob.as_ref().is_some_and(|glob| glob.is_match(text, &mut Budget::evaluation()) == Ok(true))
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
// Built once per policy and read in place: boxing the larger variant would add a pointer
// chase to every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Glob {
    /// No star: the segment must be the whole text.
    Exact(Segment),
    /// With stars.
    Starred {
        /// Matched at the start (no leading star).
        head: Option<Segment>,
        /// Found leftmost, in order, after the head.
        middle: Vec<Floating>,
        /// Matched at the end, after the middle (no trailing star).
        tail: Option<Segment>,
    },
}

/// A segment between two stars, its `?`s next to a star counted apart: `*??x*` matches what
/// `??*x*` matches, so they are skipped, never searched for. (Searched for, a segment of
/// 40,000 `?`s cost 40,000 comparisons at every character of the call.)
#[derive(Debug, Clone)]
struct Floating {
    /// Characters skipped before the core.
    lead: usize,
    /// The segment from its first to its last token that is not `?`; `None` for only `?`s.
    core: Option<Segment>,
    /// Characters skipped after the core.
    trail: usize,
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
        if !tokens.contains(&Token::Star) {
            return Glob::Exact(Segment::new(tokens));
        }
        let runs: Vec<&[Token]> = tokens.split(|t| *t == Token::Star).collect();
        let (first, rest) = runs.split_first().expect("split yields at least one run");
        let (last, inner) = rest.split_last().expect("a star splits in two");
        let segment = |run: &&[Token]| (!run.is_empty()).then(|| Segment::new(run));
        Glob::Starred {
            head: segment(first),
            middle: inner.iter().filter(|run| !run.is_empty()).map(|run| Floating::new(run)).collect(),
            tail: segment(last),
        }
    }

    fn is_match(&self, text: &str, budget: &mut Budget) -> Result<bool, Exhausted> {
        let (head, middle, tail) = match self {
            Glob::Exact(only) => return Ok(only.match_at(text, 0, budget)? == Some(text.len())),
            Glob::Starred { head, middle, tail } => (head, middle, tail),
        };
        let mut pos = 0;
        if let Some(head) = head {
            match head.match_at(text, 0, budget)? {
                Some(end) => pos = end,
                None => return Ok(false),
            }
        }
        for segment in middle {
            match segment.find(text, pos, budget)? {
                Some(end) => pos = end,
                None => return Ok(false),
            }
        }
        match tail {
            None => Ok(true),
            Some(tail) => tail.match_suffix(text, pos, budget),
        }
    }
}

impl Floating {
    fn new(tokens: &[Token]) -> Self {
        let lead = tokens.iter().take_while(|t| **t == Token::Any).count();
        let trail = tokens[lead..].iter().rev().take_while(|t| **t == Token::Any).count();
        let core = &tokens[lead..tokens.len() - trail];
        Floating { lead, core: (!core.is_empty()).then(|| Segment::new(core)), trail }
    }

    /// The end of the leftmost match at or after `pos`. The core's leftmost match is the
    /// only candidate: any later one ends later, with fewer characters left for the trail.
    fn find(&self, text: &str, pos: usize, budget: &mut Budget) -> Result<Option<usize>, Exhausted> {
        let Some(start) = skip(text, pos, self.lead, budget)? else { return Ok(None) };
        let end = match &self.core {
            None => start,
            Some(core) => match core.find(text, start, budget)? {
                Some(end) => end,
                None => return Ok(None),
            },
        };
        skip(text, end, self.trail, budget)
    }
}

/// The end of the `count` characters from `pos`, if the text has that many.
fn skip(text: &str, pos: usize, count: usize, budget: &mut Budget) -> Result<Option<usize>, Exhausted> {
    budget.spend(count)?;
    let mut chars = text[pos..].char_indices();
    if count > 0 && chars.nth(count - 1).is_none() {
        return Ok(None);
    }
    Ok(Some(chars.next().map_or(text.len(), |(offset, _)| pos + offset)))
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
    fn match_at(&self, text: &str, pos: usize, budget: &mut Budget) -> Result<Option<usize>, Exhausted> {
        match self {
            Segment::Literal { text: literal, .. } => {
                budget.searched(literal.len())?;
                Ok(text[pos..].starts_with(literal.as_str()).then_some(pos + literal.len()))
            }
            Segment::Chars(tokens) => {
                let mut chars = text[pos..].char_indices();
                for (compared, token) in tokens.iter().enumerate() {
                    let matched = chars.next().is_some_and(|(_, c)| token.matches(c));
                    if !matched {
                        budget.spend(compared + 1)?;
                        return Ok(None);
                    }
                }
                budget.spend(tokens.len())?;
                Ok(Some(chars.next().map_or(text.len(), |(offset, _)| pos + offset)))
            }
        }
    }

    /// The end of the leftmost match at or after `pos`.
    fn find(&self, text: &str, pos: usize, budget: &mut Budget) -> Result<Option<usize>, Exhausted> {
        match self {
            Segment::Literal { text: literal, finder } => {
                let found = finder.find(&text.as_bytes()[pos..]);
                budget.searched(found.map_or(text.len() - pos, |at| at + literal.len()))?;
                Ok(found.map(|at| pos + at + literal.len()))
            }
            Segment::Chars(tokens) => {
                // A core starts with a literal or a class: a literal first character is
                // searched for, not tried at every character.
                let first = match tokens.first() {
                    Some(Token::Literal(c)) => Some(*c),
                    _ => None,
                };
                let mut at = pos;
                while at < text.len() {
                    if let Some(c) = first {
                        match text[at..].find(c) {
                            Some(offset) => {
                                budget.searched(offset)?;
                                at += offset;
                            }
                            None => {
                                budget.searched(text.len() - at)?;
                                return Ok(None);
                            }
                        }
                    }
                    if let Some(end) = self.match_at(text, at, budget)? {
                        return Ok(Some(end));
                    }
                    at += text[at..].chars().next().map_or(1, char::len_utf8);
                }
                Ok(None)
            }
        }
    }

    /// Whether this segment ends `text` without starting before `pos`.
    fn match_suffix(&self, text: &str, pos: usize, budget: &mut Budget) -> Result<bool, Exhausted> {
        match self {
            Segment::Literal { text: literal, .. } => {
                budget.searched(literal.len())?;
                Ok(text.len() >= pos + literal.len() && text.ends_with(literal.as_str()))
            }
            Segment::Chars(tokens) => {
                budget.spend(tokens.len())?;
                match text[pos..].char_indices().rev().nth(tokens.len() - 1) {
                    Some((offset, _)) => Ok(self.match_at(text, pos + offset, budget)? == Some(text.len())),
                    None => Ok(false),
                }
            }
        }
    }
}

/// Checks one glob of a policy's `tools` as Python would compile it, and its length against
/// [`limits::MAX_GLOB_CHARS`]; `Ok(false)` for a glob that can never match
/// (an empty range such as `[z-a]`, which fnmatch turns into a never-matching pattern).
pub fn check(glob: &str) -> Result<bool, GlobError> {
    limits::check_glob_length(glob).map_err(|reason| GlobError { glob: format!("{:.40}…", glob), reason })?;
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
