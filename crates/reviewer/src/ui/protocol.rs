//! What a control protocol step did, shown beside the call: the untrusted model's call and the
//! trusted model's side by side (`trusted_edit`, `defer_to_trusted`), or every sample the
//! untrusted model drew again (`resample`), each with the monitor's score and reason or why it
//! has none, the one the step chose marked, and the evidence their scores make.

use std::fmt::Write as _;

use airlock_records::monitor::{NoteCall, NoteProtocol};

use super::{Content, python_block, rendered_call, safe_html};

/// A control protocol's note, with the monitor's score of the call as the model made it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Protocol {
    /// What the step did.
    pub note: NoteProtocol,
    /// The monitor's score of the original call.
    pub score: Option<f64>,
}

/// One call of the comparison: a title, the call (none when the model made none), what the
/// monitor said of it, and whether the step chose it (the least suspicious sample).
struct Column<'a> {
    title: String,
    call: Option<&'a NoteCall>,
    score: Option<f64>,
    reason: Option<&'a str>,
    error: Option<&'a str>,
    chosen: bool,
}

impl Protocol {
    /// The protocol's name as a person reads it.
    pub fn title(&self) -> String {
        match (self.note.name.as_str(), self.note.mode.as_deref()) {
            ("trusted_edit", _) => "Trusted editing".into(),
            ("defer_to_trusted", _) => "Deferred to the trusted model".into(),
            ("resample", Some("incriminate")) => "Resampled for incrimination".into(),
            ("resample", _) => "Resampled".into(),
            (other, _) => other.into(),
        }
    }

    /// One line saying who was asked, against which threshold, and what the scores add up to.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.note.model.is_empty() {
            parts.push(format!("model {}", self.note.model));
        }
        if let Some(score) = self.score {
            parts.push(format!("score {score}"));
        }
        parts.push(format!("threshold {}", self.note.threshold));
        if let Some(evidence) = &self.note.evidence {
            parts.push(format!("evidence: max {}, mean {}", evidence.max, round(evidence.mean)));
        }
        parts.join(" · ")
    }

    /// The calls to compare, in order: the original, then the replacement or every sample.
    fn columns(&self) -> Vec<Column<'_>> {
        let original = self.note.original.as_ref().map(|call| Column {
            title: "Original (untrusted model)".into(),
            call: Some(call),
            score: self.score,
            reason: None,
            error: None,
            chosen: false,
        });
        let samples = self.note.samples.iter().enumerate().map(|(index, sample)| Column {
            title: format!("Sample {}", index + 1),
            call: sample.call.as_ref(),
            score: sample.score,
            reason: sample.reason.as_deref(),
            error: sample.error.as_deref(),
            chosen: sample.chosen,
        });
        // A resample's replacement is one of its samples, already marked; the trusted model's
        // runs only when the step's answer says so (a different tool does not).
        let replacement = self.note.replacement.as_ref().filter(|_| self.note.samples.is_empty()).map(|call| Column {
            title: format!(
                "Replacement ({})",
                if self.note.model.is_empty() { "trusted model" } else { &self.note.model }
            ),
            call: Some(call),
            score: None,
            reason: None,
            error: None,
            chosen: false,
        });
        original.into_iter().chain(samples).chain(replacement).collect()
    }

    /// As HTML: a section with the title and summary, then the calls side by side, each as
    /// Inspect's default view renders a call.
    pub fn html(&self) -> String {
        let mut html = format!(
            "<section class=\"protocol\"><h3>{}</h3><p class=\"summary\">{}</p><ol class=\"calls\">",
            safe_html(&self.title()),
            safe_html(&self.summary())
        );
        for column in self.columns() {
            let _ = write!(
                html,
                "<li class=\"column{}\"><h4>{}{}</h4>",
                if column.chosen { " chosen" } else { "" },
                safe_html(&column.title),
                if column.chosen { " <span class=\"badge chosen\">chosen</span>" } else { "" },
            );
            let call = match column.call {
                Some(call) => {
                    Content { title: None, markdown: true, text: python_block(&call.function, &call.arguments) }
                }
                None => Content { title: None, markdown: false, text: "(no call)".into() },
            };
            html.push_str(&call.html());
            let fields = [
                ("Score", column.score.map(|score| score.to_string())),
                ("Reason", column.reason.map(str::to_owned)),
                ("Error", column.error.map(str::to_owned)),
            ];
            if fields.iter().any(|(_, value)| value.is_some()) {
                html.push_str("<dl class=\"meta\">");
                for (label, value) in fields {
                    if let Some(value) = value {
                        let _ = write!(html, "<div><dt>{label}</dt><dd>{}</dd></div>", safe_html(&value));
                    }
                }
                html.push_str("</dl>");
            }
            html.push_str("</li>");
        }
        html.push_str("</ol></section>");
        html
    }

    /// As lines of text (not yet display-safe): the title and summary, then each call on one
    /// line with its score and reason or error, the one the step chose marked.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!("{}: {}", self.title(), self.summary())];
        for column in self.columns() {
            let call = column.call.map_or_else(|| "(no call)".into(), |c| rendered_call(&c.function, &c.arguments));
            let mut line = format!("{}{}: {call}", column.title, if column.chosen { " [chosen]" } else { "" });
            if let Some(score) = column.score {
                let _ = write!(line, " · score {score}");
            }
            if let Some(said) = column.reason.or(column.error) {
                let _ = write!(line, " · {said}");
            }
            lines.push(line);
        }
        lines
    }
}

/// `value` to two decimals at most (a mean of scores).
fn round(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests;
