//! Inspect policy documents: YAML or JSON, read as Inspect reads them, with the line and
//! column of every node kept for error messages.
//!
//! Like Inspect's `read_config_object`, a document whose text starts with `{` is JSON and
//! anything else YAML (YAML 1.1 booleans, merge keys and last-wins duplicate keys, as
//! PyYAML's `safe_load`). Top-level keys other than `approvers` and `reviewers` are ignored,
//! as pydantic ignores them, except Airlock's control sections (`breaker`, `incident`); each entry needs `name` and `tools`, and every other key,
//! together with an optional `params` mapping, becomes a parameter of the step.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};

use crate::call::Kind;
use crate::control;
use crate::glob::py_strip;
use crate::limits;

/// A place in a policy document, counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    /// The line, from 1 (0 when unknown).
    pub line: u64,
    /// The column, from 1 (0 when unknown).
    pub column: u64,
}

/// A policy document that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct PolicyError {
    /// The document's name (its path, or `<inline>`).
    pub source_name: String,
    /// Where the problem is.
    pub location: Location,
    /// What is wrong.
    pub message: String,
    /// The offending line of the document, for display.
    pub line_text: Option<String>,
}

/// One entry of an `approvers:` or `reviewers:` list.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The step's name.
    pub name: String,
    /// The `tools` specs as written (a lone string becomes a list of one).
    pub tools: Vec<String>,
    /// Where each spec of `tools` stands.
    pub tools_locations: Vec<Location>,
    /// Every other key, `params` merged in.
    pub params: Map<String, Value>,
    /// Where each parameter's value stands.
    pub param_locations: Vec<(String, Location)>,
    /// Where the entry starts.
    pub location: Location,
}

/// A top-level mapping Airlock reads beside the step lists (`breaker:`, `incident:`; see
/// [`crate::control`]), which Inspect ignores.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Its key.
    pub name: String,
    /// Its entries.
    pub params: Map<String, Value>,
    /// Where each entry's value stands.
    pub param_locations: Vec<(String, Location)>,
    /// Where the key stands.
    pub location: Location,
}

/// A parsed policy document.
#[derive(Debug, Clone)]
pub struct Document {
    /// The document's name, for messages.
    pub source_name: String,
    /// The document's text.
    pub text: String,
    /// sha256 of the text, hex.
    pub digest: String,
    /// The `approvers:` list, if present.
    pub approvers: Option<Vec<Entry>>,
    /// The `reviewers:` list, if present.
    pub reviewers: Option<Vec<Entry>>,
    /// The control sections (`breaker:`, `incident:`), Airlock's alone.
    pub sections: Vec<Section>,
    /// Top-level keys Inspect ignores, with where they stand.
    pub ignored_keys: Vec<(String, Location)>,
}

// === impl Document ===

impl Document {
    /// Parses a document's text; `source_name` names it in errors.
    pub fn parse(source_name: &str, text: &str) -> Result<Document, PolicyError> {
        let error = |location: Location, message: String| PolicyError::new(source_name, text, location, message);
        let is_json = py_strip(text).starts_with('{');
        if is_json {
            // Inspect reads JSON with `json.loads`: report its syntax errors as JSON errors.
            if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                let location = Location { line: e.line() as u64, column: e.column() as u64 };
                return Err(error(location, format!("invalid JSON: {e}")));
            }
        }
        let root: Spanned<Node> = serde_saphyr::from_str_with_options(text, yaml_options()).map_err(|e| {
            let location = e.location().map(|l| Location { line: l.line(), column: l.column() }).unwrap_or_default();
            error(
                location,
                format!("invalid {}: {}", if is_json { "JSON" } else { "YAML" }, first_line(&e.to_string())),
            )
        })?;
        check_texts(&root).map_err(|(l, m)| error(l, m))?;
        let Node::Map(top) = root.value else {
            return Err(error(
                at(&root),
                "a policy must be a mapping with an 'approvers:' or 'reviewers:' list".into(),
            ));
        };
        let mut document = Document {
            source_name: source_name.to_owned(),
            text: text.to_owned(),
            digest: digest(text),
            approvers: None,
            reviewers: None,
            sections: Vec::new(),
            ignored_keys: Vec::new(),
        };
        for (key, value) in top {
            let name = key.value.as_key().map_err(|m| error(at(&key), m))?;
            let slot = match name.as_str() {
                "approvers" => &mut document.approvers,
                "reviewers" => &mut document.reviewers,
                control::BREAKER | control::INCIDENT => {
                    let section = section(name, at(&key), value).map_err(|(l, m)| error(l, m))?;
                    document.sections.retain(|earlier| earlier.name != section.name);
                    document.sections.push(section);
                    continue;
                }
                _ => {
                    document.ignored_keys.push((name, at(&key)));
                    continue;
                }
            };
            let Node::Seq(items) = value.value else {
                return Err(error(at(&value), format!("'{name}' must be a list of steps, not {}", value.value.kind())));
            };
            *slot = Some(
                items.into_iter().map(|item| entry(item).map_err(|(l, m)| error(l, m))).collect::<Result<_, _>>()?,
            );
        }
        Ok(document)
    }

    /// The entries of the section for `kind`, or an error naming the missing section.
    pub fn entries(&self, kind: Kind) -> Result<&[Entry], PolicyError> {
        let section = match kind {
            Kind::Approval => &self.approvers,
            Kind::Review => &self.reviewers,
        };
        section.as_deref().ok_or_else(|| {
            PolicyError::new(
                &self.source_name,
                &self.text,
                Location { line: 1, column: 1 },
                format!("the policy has no '{}:' list, so it cannot be used for {kind}", kind.section()),
            )
        })
    }

    /// An error at `location` in this document.
    pub fn error(&self, location: Location, message: impl Into<String>) -> PolicyError {
        PolicyError::new(&self.source_name, &self.text, location, message.into())
    }
}

/// sha256 of a policy's text, hex: the digest recorded with every decision.
pub fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// PyYAML's `safe_load` conventions.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::LastWins,
        legacy_octal_numbers: true,
    }
}

fn entry(item: Spanned<Node>) -> Result<Entry, (Location, String)> {
    let location = at(&item);
    let Node::Map(fields) = item.value else {
        return Err((
            location,
            format!("each step must be a mapping with 'name' and 'tools', not {}", item.value.kind()),
        ));
    };
    let (mut name, mut tools, mut tools_locations) = (None, None, Vec::new());
    let (mut params, mut extra) = (Vec::new(), Vec::new());
    for (key, value) in fields {
        let key_name = key.value.as_key().map_err(|m| (at(&key), m))?;
        match key_name.as_str() {
            "name" => {
                let location = at(&value);
                match value.value {
                    Node::Str(s) => {
                        limits::check_step_name(&s).map_err(|m| (location, m))?;
                        name = Some(s);
                    }
                    other => return Err((location, format!("'name' must be a string, not {}", other.kind()))),
                }
            }
            "tools" => {
                let (specs, locations) = tool_specs(value)?;
                tools = Some(specs);
                tools_locations = locations;
            }
            "params" => match value.value {
                Node::Map(entries) => params = entries,
                Node::Null => {}
                ref other => return Err((at(&value), format!("'params' must be a mapping, not {}", other.kind()))),
            },
            _ => extra.push((key_name, value)),
        }
    }
    let name = name.ok_or((location, "this step has no 'name'".to_owned()))?;
    let tools = tools.ok_or((location, format!("step '{name}' has no 'tools' (use \"*\" for every tool)")))?;
    // `params | extra`: keys written beside `name` win over the same key in `params`.
    let mut map = Map::new();
    let mut param_locations = Vec::new();
    let explicit = params.into_iter().map(|(k, v)| Ok((k.value.as_key().map_err(|m| (at(&k), m))?, v)));
    for pair in explicit.collect::<Result<Vec<_>, (Location, String)>>()?.into_iter().chain(extra) {
        let (key, value) = pair;
        param_locations.retain(|(k, _): &(String, Location)| k != &key);
        let location = at(&value);
        param_locations.push((key.clone(), location));
        map.insert(key, value.value.into_json().map_err(|m| (location, m))?);
    }
    Ok(Entry { name, tools, tools_locations, params: map, param_locations, location })
}

fn section(name: String, location: Location, value: Spanned<Node>) -> Result<Section, (Location, String)> {
    let Node::Map(fields) = value.value else {
        return Err((at(&value), format!("'{name}' must be a mapping, not {}", value.value.kind())));
    };
    let (mut params, mut param_locations) = (Map::new(), Vec::new());
    for (key, value) in fields {
        let key = key.value.as_key().map_err(|m| (at(&key), m))?;
        let location = at(&value);
        param_locations.retain(|(k, _): &(String, Location)| *k != key);
        param_locations.push((key.clone(), location));
        params.insert(key, value.value.into_json().map_err(|m| (location, m))?);
    }
    Ok(Section { name, params, param_locations, location })
}

fn tool_specs(value: Spanned<Node>) -> Result<(Vec<String>, Vec<Location>), (Location, String)> {
    let location = at(&value);
    match value.value {
        Node::Str(s) => Ok((vec![s], vec![location])),
        Node::Seq(items) => items
            .into_iter()
            .map(|item| match item.value {
                Node::Str(ref s) => Ok((s.clone(), at(&item))),
                ref other => Err((at(&item), format!("'tools' must list strings, not {}", other.kind()))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|pairs| pairs.into_iter().unzip()),
        Node::Null => Err((location, "'tools' is empty: write \"*\" for every tool (a bare * is a YAML alias)".into())),
        other => Err((location, format!("'tools' must be a string or a list of strings, not {}", other.kind()))),
    }
}

/// Refuses the first string (key or value) that [`limits::check_text`] refuses, where it stands.
fn check_texts(node: &Spanned<Node>) -> Result<(), (Location, String)> {
    match &node.value {
        Node::Str(s) => limits::check_text(s).map_err(|m| (at(node), m)),
        Node::Seq(items) => items.iter().try_for_each(check_texts),
        Node::Map(entries) => entries.iter().try_for_each(|(key, value)| {
            check_texts(key)?;
            check_texts(value)
        }),
        Node::Null | Node::Bool(_) | Node::Number(_) => Ok(()),
    }
}

fn at<T>(spanned: &Spanned<T>) -> Location {
    Location { line: spanned.referenced.line(), column: spanned.referenced.column() }
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message)
}

// === impl PolicyError ===

impl PolicyError {
    fn new(source_name: &str, text: &str, location: Location, message: String) -> Self {
        let line_text =
            (location.line > 0).then(|| text.lines().nth(location.line as usize - 1).map(str::to_owned)).flatten();
        PolicyError { source_name: source_name.to_owned(), location, message, line_text }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Location { line, column } = self.location;
        write!(f, "{}:{line}:{column}: {}", self.source_name, self.message)?;
        if let Some(text) = &self.line_text {
            let gutter = line.to_string().len();
            write!(
                f,
                "\n{:gutter$} |\n{line} | {text}\n{:gutter$} | {:>column$}",
                "",
                "",
                "^",
                column = column.max(1) as usize
            )?;
        }
        Ok(())
    }
}

// === Node: a YAML value with the locations of its children ===

/// A YAML or JSON value whose children keep their locations.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Number(Number),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Number(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    /// A mapping key as text: keys must be strings, as Python keyword arguments are.
    fn as_key(&self) -> Result<String, String> {
        match self {
            Node::Str(s) => Ok(s.clone()),
            other => Err(format!("keys must be strings, not {}", other.kind())),
        }
    }

    fn into_json(self) -> Result<Value, String> {
        Ok(match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(b),
            Node::Number(n) => Value::Number(n),
            Node::Str(s) => Value::String(s),
            Node::Seq(items) => Value::Array(items.into_iter().map(|i| i.value.into_json()).collect::<Result<_, _>>()?),
            Node::Map(entries) => Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| Ok((k.value.as_key()?, v.value.into_json()?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Node, E> {
        Ok(Node::Number(n.into()))
    }

    fn visit_i128<E: de::Error>(self, n: i128) -> Result<Node, E> {
        serde_json::from_str(&n.to_string()).map(Node::Number).map_err(E::custom)
    }

    fn visit_u128<E: de::Error>(self, n: u128) -> Result<Node, E> {
        serde_json::from_str(&n.to_string()).map(Node::Number).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Node, E> {
        Number::from_f64(x).map(Node::Number).ok_or_else(|| E::custom("infinite and NaN numbers are not supported"))
    }

    fn visit_str<E>(self, s: &str) -> Result<Node, E> {
        Ok(Node::Str(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Node, E> {
        Ok(Node::Str(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries: Vec<(Spanned<Node>, Spanned<Node>)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<Spanned<Node>, Spanned<Node>>()? {
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests;
