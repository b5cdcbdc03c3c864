//! Renders a call exactly as Inspect's `format_function_call(name, args, width=sys.maxsize)`.
//!
//! Globs match this text, so every byte counts: keys in argument order, strings in `'…'`
//! with no escaping at the top level, lists and dicts through `pprint.pformat` (one line,
//! dict keys sorted, Python `repr` inside), everything else through `str()`.

use std::fmt::Write;

use serde_json::{Map, Number, Value};
use unicode_general_category::{GeneralCategory, get_general_category};

use crate::call::Call;

/// `name(k1=v1, k2=v2)`, as Inspect renders the call for matching.
pub fn format_function_call(call: &Call) -> String {
    // Top-level strings are copied as they are: room for them up front saves regrowing the
    // text of long ones (code, file contents) several times.
    let arguments: usize =
        call.arguments.iter().map(|(key, value)| key.len() + 5 + value.as_str().map_or(24, str::len)).sum();
    let mut out = String::with_capacity(call.function.len() + 2 + arguments);
    out.push_str(&call.function);
    out.push('(');
    for (index, (key, value)) in call.arguments.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        out.push_str(key);
        out.push('=');
        write_value(&mut out, value);
    }
    out.push(')');
    out
}

/// `name(k1=v1, k2=v2)` as a Python call expression: like [`format_function_call`], but every
/// string (top-level values, and keys that are not identifiers) as Python's `repr`. Unlike
/// Inspect's rendering, which quotes top-level strings without escaping them, no argument
/// can make one call's text equal another's, and the text is one line.
pub fn format_call_expression(call: &Call) -> String {
    let mut out = String::with_capacity(call.function.len() + 32);
    out.push_str(&call.function);
    out.push('(');
    for (index, (key, value)) in call.arguments.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        if is_identifier(key) {
            out.push_str(key);
        } else {
            write_str_repr(&mut out, key);
        }
        out.push('=');
        write_repr(&mut out, value);
    }
    out.push(')');
    out
}

/// An ASCII Python identifier: a letter or `_`, then letters, digits or `_`.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One argument value as Inspect's `format_value` renders it.
pub fn format_value(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        // Top-level strings are quoted but not escaped: `f"'{value}'"`.
        Value::String(s) => {
            out.push('\'');
            out.push_str(s);
            out.push('\'');
        }
        Value::Array(_) | Value::Object(_) => write_repr(out, value),
        scalar => write_repr(out, scalar),
    }
}

/// Python's `repr` of a JSON value as `json.loads` would build it, with dict keys sorted
/// as `pprint` sorts them.
fn write_repr(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str_repr(out, s),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_dict_repr(out, map),
    }
}

fn write_dict_repr(out: &mut String, map: &Map<String, Value>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (index, (key, value)) in entries.into_iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        write_str_repr(out, key);
        out.push_str(": ");
        write_repr(out, value);
    }
    out.push('}');
}

/// A JSON number as Python's `str(json.loads(text))`: integers of any size as they are,
/// everything with a fraction or an exponent as a float.
fn write_number(out: &mut String, number: &Number) {
    let text = number.as_str();
    if text.contains(['.', 'e', 'E']) {
        out.push_str(&float_repr(text.parse::<f64>().unwrap_or(f64::NAN)));
    } else if text.trim_start_matches('-').bytes().all(|b| b == b'0') {
        out.push('0');
    } else {
        out.push_str(text);
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation while the
/// decimal point sits between 10^-4 and 10^16, in `1e+16` notation outside.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust's `{:e}` also prints the shortest round-trip digits: `d.ddde±x`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().expect("`{:e}` prints an integer exponent");
    let point = exponent + 1; // digits before the decimal point
    let mut out = String::new();
    if x.is_sign_negative() {
        out.push('-');
    }
    if digits == "0" {
        out.push_str("0.0");
    } else if point > -4 && point <= 16 {
        let n = digits.len() as i32;
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else if point < n {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        } else {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (point - n) as usize));
            out.push_str(".0");
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
    out
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`, backslash escapes
/// for the quote, `\`, `\t`, `\n`, `\r`, and `\x`/`\u`/`\U` escapes for what is not printable.
pub fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for ch in s.chars() {
        match ch {
            c if c == quote || c == '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x7f || is_printable(c) => out.push(c),
            c if (c as u32) <= 0xff => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) <= 0xffff => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable` for one character: not a control, format, surrogate,
/// private-use or unassigned character, and no separator other than the space.
fn is_printable(c: char) -> bool {
    use GeneralCategory::*;
    c == ' '
        || !matches!(
            get_general_category(c),
            Control
                | Format
                | Surrogate
                | PrivateUse
                | Unassigned
                | LineSeparator
                | ParagraphSeparator
                | SpaceSeparator
        )
}

#[cfg(test)]
mod tests;
