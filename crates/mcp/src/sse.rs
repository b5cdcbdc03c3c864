//! Server-sent events as streamable HTTP carries MCP messages: each event's `data` is one
//! JSON-RPC message.

/// Reads the events of an SSE stream from the chunks it arrives in.
#[derive(Debug, Default)]
pub struct Events {
    buffer: Vec<u8>,
}

impl Events {
    /// Takes a chunk; returns the data of every event it completed (events without data,
    /// such as a priming event with only an id, are skipped).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, next)) = event_end(&self.buffer) {
            let event: Vec<u8> = self.buffer.drain(..next).take(end).collect();
            let text = String::from_utf8_lossy(&event);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|value| value.strip_prefix(' ').unwrap_or(value))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }
}

/// Where the first event in `buffer` ends, and where the next one starts.
fn event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buffer.len() {
        match &buffer[i..] {
            [b'\n', b'\n', ..] => return Some((i, i + 2)),
            [b'\r', b'\n', b'\r', b'\n', ..] => return Some((i, i + 4)),
            [b'\r', b'\r', ..] => return Some((i, i + 2)),
            _ => i += 1,
        }
    }
    None
}

/// One event carrying `data` (a message, on one line).
pub fn event(data: &str) -> String {
    format!("event: message\ndata: {data}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_over_chunks_are_read_whole() {
        let mut events = Events::default();
        assert!(events.push(b"event: message\ndata: {\"a\"").is_empty());
        assert_eq!(events.push(b":1}\n\nid: 7\ndata: x\n\n"), ["{\"a\":1}", "x"]);
    }

    #[test]
    fn crlf_lines_multi_line_data_and_events_without_data_are_handled() {
        let mut events = Events::default();
        let read = events.push(b"id: 1\r\n\r\ndata: a\r\ndata: b\r\n\r\n: comment\n\n");
        assert_eq!(read, ["a\nb"]);
    }

    #[test]
    fn an_event_written_is_read_back() {
        let mut events = Events::default();
        assert_eq!(events.push(event(r#"{"id":1}"#).as_bytes()), [r#"{"id":1}"#]);
    }
}
