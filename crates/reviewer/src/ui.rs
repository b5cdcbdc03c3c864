//! Showing untrusted text to a person: Inspect's `display_safe`, HTML escaping, safe
//! markdown, and the task views the web UI and the console share.
//!
//! Everything in a task comes from a model or a runner and is untrusted. Before it reaches a
//! page it is made display-safe (control, zero-width, bidi and tag characters become visible
//! `‹U+XXXX›` markers, exactly as Inspect's `display_safe` shows them), then escaped. Markdown
//! is rendered with pulldown-cmark with raw HTML shown as text, and links and images shown as
//! their text and address, never followed or loaded.

pub mod card;
pub mod claims;
pub mod pages;
pub mod protocol;
pub mod triage;
pub mod why;

use airlock_contract::v1;
use airlock_policy::Call;
use airlock_policy::render::format_function_call;
use pulldown_cmark::{CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};

use airlock_records::monitor::MonitorNote;

use self::protocol::Protocol;
use airlock_records::time::Utc;

use crate::task::Returned;

/// The marker's opening character (U+2039).
pub const MARKER_OPEN: char = '\u{2039}';
/// The marker's closing character (U+203A).
pub const MARKER_CLOSE: char = '\u{203A}';

pub use airlock_telemetry::logged::is_unsafe;

/// Whether [`display_safe`] replaces anything in `text`.
pub fn has_unsafe(text: &str) -> bool {
    text.chars().any(is_unsafe)
}

/// Text with every control and invisible character shown as `‹U+XXXX›`, as Inspect's
/// `display_safe`.
pub fn display_safe(text: &str) -> String {
    if !has_unsafe(text) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            out.push(MARKER_OPEN);
            out.push_str(&format!("U+{:04X}", c as u32));
            out.push(MARKER_CLOSE);
        } else {
            out.push(c);
        }
    }
    out
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Untrusted text as HTML: display-safe, escaped, with each marker styled so it stands out.
pub fn safe_html(text: &str) -> String {
    mark(&escape(&display_safe(text)))
}

/// Wraps each `‹U+XXXX›` marker of already-escaped HTML in `<span class="ctl">`. Only
/// [`display_safe`] produces `‹`: a `‹` in the original text became a marker itself.
fn mark(html: &str) -> String {
    if !html.contains(MARKER_OPEN) {
        return html.to_owned();
    }
    let mut out = String::with_capacity(html.len() + 64);
    let mut rest = html;
    while let Some(start) = rest.find(MARKER_OPEN) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        match tail.find(MARKER_CLOSE) {
            Some(end) => {
                let end = end + MARKER_CLOSE.len_utf8();
                out.push_str("<span class=\"ctl\" title=\"an invisible or control character\">");
                out.push_str(&tail[..end]);
                out.push_str("</span>");
                rest = &tail[end..];
            }
            None => {
                out.push_str(tail);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Renders untrusted markdown to HTML: display-safe first; raw HTML is shown as text (a
/// block as code); links and images become their text followed by their address.
pub fn markdown_html(text: &str) -> String {
    let safe = display_safe(text);
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut links: Vec<CowStr<'_>> = Vec::new();
    let events = Parser::new_ext(&safe, options).map(|event| match event {
        Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
        Event::Start(Tag::HtmlBlock) => Event::Start(Tag::CodeBlock(CodeBlockKind::Indented)),
        Event::End(TagEnd::HtmlBlock) => Event::End(TagEnd::CodeBlock),
        Event::Start(Tag::Link { dest_url, .. }) => {
            links.push(dest_url);
            Event::Text(CowStr::Borrowed(""))
        }
        Event::End(TagEnd::Link) => {
            Event::Text(CowStr::from(format!(" <{}>", links.pop().unwrap_or(CowStr::Borrowed("")))))
        }
        Event::Start(Tag::Image { dest_url, .. }) => {
            links.push(dest_url);
            Event::Text(CowStr::Borrowed("[image: "))
        }
        Event::End(TagEnd::Image) => {
            Event::Text(CowStr::from(format!("] <{}>", links.pop().unwrap_or(CowStr::Borrowed("")))))
        }
        other => other,
    });
    let mut html = String::with_capacity(safe.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events);
    mark(&html)
}

/// One piece of a task's view: text or markdown, with an optional title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// The title, if any.
    pub title: Option<String>,
    /// Whether `text` is markdown.
    pub markdown: bool,
    /// The content.
    pub text: String,
}

impl Content {
    /// As HTML (title, then the rendered content), safe for any input.
    pub fn html(&self) -> String {
        let title = self.title.as_deref().map(|t| format!("<h4>{}</h4>", safe_html(t))).unwrap_or_default();
        let body = if self.markdown {
            format!("<div class=\"md\">{}</div>", markdown_html(&self.text))
        } else {
            format!("<pre class=\"text\">{}</pre>", safe_html(&self.text))
        };
        format!("{title}{body}")
    }
}

/// What a person is shown about a call, as Inspect's `render_tool_approval` builds it: the
/// view's context and call (placeholders filled from the arguments), the default view when the
/// runner sent none, and for a review the result appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The view's context.
    pub context: Option<Content>,
    /// The call (and, for a review, its result).
    pub call: Content,
}

/// The view of `call` a person sees, with what the call returned for a review.
pub fn shown(call: Option<&v1::ToolCall>, view: Option<&v1::ToolCallView>, review: Option<Returned<'_>>) -> Shown {
    let arguments: serde_json::Map<String, serde_json::Value> =
        call.and_then(|c| serde_json::from_str(&c.arguments_json).ok()).unwrap_or_default();
    let content = |c: &v1::ToolCallContent| Content {
        title: c.title.as_deref().map(|t| substitute(t, &arguments)),
        markdown: c.format == "markdown",
        text: substitute(&c.content, &arguments),
    };
    let context = view.and_then(|v| v.context.as_ref()).map(content);
    let mut shown_call = match view.and_then(|v| v.call.as_ref()) {
        Some(c) => content(c),
        None => Content { title: None, markdown: true, text: default_view(call, &arguments) },
    };
    if let Some(Returned { message, output }) = review {
        let outcome = match message {
            Some(message) => match &message.error {
                Some(error) => format!("Error ({}): {}", error.r#type, error.message),
                None => message.text.clone(),
            },
            None => output.to_owned(),
        };
        if shown_call.markdown {
            shown_call.text = format!("{}\n\n**Result**\n\n{}", shown_call.text, fenced(&outcome, ""));
        } else {
            shown_call.text = format!("{}\n\nResult\n\n{outcome}", shown_call.text);
        }
    }
    Shown { context, call: shown_call }
}

/// Inspect's default view: the call as `format_function_call` renders it, in a Python block.
fn default_view(call: Option<&v1::ToolCall>, arguments: &serde_json::Map<String, serde_json::Value>) -> String {
    let Some(call) = call else { return "*(the request carries no call)*".into() };
    python_block(&call.function, arguments)
}

/// `function(arguments)` as Inspect's default view shows a call: rendered by
/// `format_function_call`, in a Python block (markdown).
pub fn python_block(function: &str, arguments: &serde_json::Map<String, serde_json::Value>) -> String {
    fenced(&rendered_call(function, arguments), "python")
}

/// A call on one line, as Inspect's `format_function_call` renders it.
pub fn rendered_call(function: &str, arguments: &serde_json::Map<String, serde_json::Value>) -> String {
    format_function_call(&Call { id: String::new(), function: function.into(), arguments: arguments.clone() })
}

/// A call of the conversation on one line (its arguments, when unreadable, as none).
pub fn call_line(call: &v1::ToolCall) -> String {
    rendered_call(&call.function, &serde_json::from_str(&call.arguments_json).unwrap_or_default())
}

/// One labelled value of a step's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// What it is: a monitor field's label, or the key as given.
    pub label: String,
    /// The value as text: a string as is, anything else as compact JSON.
    pub value: String,
    /// Whether it is one of a monitor's note's score, reason and model.
    pub monitor: bool,
}

/// A step's metadata, read: its labelled values, and what a control protocol did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    /// The labelled values (a protocol's note is not among them).
    pub fields: Vec<Field>,
    /// What a control protocol step did, when its note says.
    pub protocol: Option<Protocol>,
}

/// A step's metadata (a JSON object) as labelled values: a monitor's score, reason and model
/// first (read as its [`MonitorNote`]), then the other keys in their order, with a control
/// protocol's note apart. Anything but an object is one `Metadata` field.
pub fn read_metadata(metadata_json: &str) -> Metadata {
    if metadata_json.trim().is_empty() {
        return Metadata::default();
    }
    let object = match serde_json::from_str(metadata_json) {
        Ok(object @ serde_json::Value::Object(_)) => object,
        _ => {
            let field = Field { label: "Metadata".into(), value: metadata_json.to_owned(), monitor: false };
            return Metadata { fields: vec![field], protocol: None };
        }
    };
    let note = MonitorNote::read(&object).unwrap_or_default();
    let protocol = note.protocol.map(|note_protocol| Protocol { note: note_protocol, score: note.score });
    let first = [
        ("score", "Score", note.score.map(|score| score.to_string())),
        ("reason", "Reason", note.reason),
        ("model", "Model", Some(note.model).filter(|model| !model.is_empty())),
    ];
    let mut fields: Vec<Field> = first
        .iter()
        .filter_map(|(_, label, value)| Some(Field { label: (*label).into(), value: value.clone()?, monitor: true }))
        .collect();
    let shown = |key: &str| {
        first.iter().any(|(known, _, value)| *known == key && value.is_some())
            || (key == "protocol" && protocol.is_some())
    };
    for (key, value) in object.as_object().into_iter().flatten().filter(|(key, _)| !shown(key)) {
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        fields.push(Field { label: key.clone(), value, monitor: false });
    }
    Metadata { fields, protocol }
}

/// `text` in a backtick fence longer than any backtick run inside it (at least three).
pub fn fenced(text: &str, lang: &str) -> String {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}{lang}\n{text}\n{fence}")
}

/// Inspect's `substitute_tool_call_content`: `{{name}}` becomes the argument's text.
pub fn substitute(text: &str, arguments: &serde_json::Map<String, serde_json::Value>) -> String {
    if !text.contains("{{") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let name_len = after.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(after.len());
        let name = &after[..name_len];
        match (name.is_empty(), after[name_len..].starts_with("}}"), arguments.get(name)) {
            (false, true, Some(value)) => {
                match value {
                    serde_json::Value::String(s) => out.push_str(s),
                    other => out.push_str(&airlock_policy::render::format_value(other)),
                }
                rest = &after[name_len + 2..];
            }
            _ => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `ms` (a duration) as "12s ago", "3m ago", "2h 5m ago".
pub fn ago(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        _ => format!("{}h {}m ago", s / 3600, (s % 3600) / 60),
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: i64) -> String {
    let Utc { year, month, day, hour, minute, second } = Utc::from_unix_seconds(ms.div_euclid(1000));
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02} UTC")
}

#[cfg(test)]
mod tests;
