//! Untrusted text in a role's log: call keys, queues, pools and reasons come from runners and
//! models, and a NUL, a newline or a right-to-left override in them must not forge or hide a
//! log line. [`Logged`] writes such characters as `\u{…}` escapes (and `\` as `\\`, so an
//! escape in the text itself reads apart from one made here). [`is_unsafe`] is the set the
//! reviewer's pages show as markers, as Inspect's `display_safe` does.

use std::fmt::{self, Write as _};

/// Text shown in a log line with its control, invisible and bidi characters escaped:
/// `warn!(correlation = %Logged(&key), …)`.
#[derive(Debug, Clone, Copy)]
pub struct Logged<T>(pub T);

impl<T: fmt::Display> fmt::Display for Logged<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(Escaping(f), "{}", self.0)
    }
}

/// Whether Inspect's `display_safe` shows `c` as a marker: C0 controls but tab and newline,
/// DEL, C1 controls, zero-width characters and the word joiner, bidi embeddings, overrides
/// and isolates, the zero-width no-break space, the tag block, and the marker's own opening
/// character (so typed text cannot pass for a marker).
pub fn is_unsafe(c: char) -> bool {
    matches!(
        c as u32,
        0x00..=0x08
            | 0x0B..=0x1F
            | 0x7F..=0x9F
            | 0x200B..=0x200D
            | 0x2039
            | 0x2060
            | 0x202A..=0x202E
            | 0x2066..=0x2069
            | 0xFEFF
            | 0xE0000..=0xE007F
    )
}

/// Whether `c` is written escaped: controls (newlines and tabs too), what Inspect's
/// `display_safe` marks, the bidi marks and the line and paragraph separators.
fn escaped(c: char) -> bool {
    c.is_control() || is_unsafe(c) || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{2028}' | '\u{2029}')
}

/// Writes what it is given to a formatter, escaping as [`Logged`] says.
struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl fmt::Write for Escaping<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for c in text.chars() {
            match c {
                '\\' => self.0.write_str("\\\\")?,
                c if escaped(c) => write!(self.0, "\\u{{{:x}}}", c as u32)?,
                c => self.0.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invisible_characters_are_escaped() {
        let cases = [
            ("approval/run/s1/1/c1", "approval/run/s1/1/c1"),
            ("c\u{0}1", "c\\u{0}1"),
            ("exe\u{202e}txt.sh", "exe\\u{202e}txt.sh"),
            ("line\nforged=1\r", "line\\u{a}forged=1\\u{d}"),
            ("\u{1b}[2J tab\t", "\\u{1b}[2J tab\\u{9}"),
            (
                "\u{2066}iso\u{2069} \u{200f}rlm \u{200b}zw \u{2028}",
                "\\u{2066}iso\\u{2069} \\u{200f}rlm \\u{200b}zw \\u{2028}",
            ),
            ("already \\u{0} escaped", "already \\\\u{0} escaped"),
            ("naïve 日本 ‹x›", "naïve 日本 \\u{2039}x›"),
        ];
        for (text, logged) in cases {
            assert_eq!(Logged(text).to_string(), logged, "{text:?}");
        }
        // Anything that displays, an error included, is escaped the same way.
        let error = std::io::Error::other("bad\u{0}key");
        assert_eq!(Logged(&error).to_string(), "bad\\u{0}key");
    }
}
