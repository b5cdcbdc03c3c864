//! A small client for the reviewer API (and any plain-HTTP JSON service): what the console
//! and the tests use. HTTP/1.1 over TCP, one connection per request, no TLS: reach a remote
//! service through a tunnel or a TLS-terminating proxy.

use std::io;

use airlock_records::review::claim::{ClaimBody, Claimed};
use airlock_records::review::control::{IncidentBody, IncidentMarked};
use airlock_records::review::{DecisionBody, ErrorView, ReviewerView, TaskList, TaskView};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A response: its status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lowercase, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Sends one request to `url` (`http://host:port/path`) and reads the whole response.
pub async fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> io::Result<Response> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {url}"));
    let rest = url.strip_prefix("http://").ok_or_else(|| invalid("only http:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(invalid("no host in the URL"));
    }
    let address = if authority.contains(':') { authority.to_owned() } else { format!("{authority}:80") };
    let mut stream = TcpStream::connect(address).await?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (name, value) in headers {
        if name.contains(['\r', '\n']) || value.contains(['\r', '\n']) {
            return Err(invalid("a header carries a line break"));
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() || method != "GET" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    // Read until the response is complete, not to the end of the stream: some servers keep
    // the connection open despite `Connection: close`.
    let mut raw = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        raw.extend_from_slice(&buffer[..read]);
        if complete(&raw) {
            break;
        }
    }
    parse(&raw)
}

/// Whether `raw` holds a whole response (headers, then the body its headers announce).
fn complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let body = &raw[end + 4..];
    if head.contains("transfer-encoding: chunked") || head.contains("transfer-encoding:chunked") {
        return body.ends_with(b"0\r\n\r\n");
    }
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == "content-length").then(|| value.trim().parse::<usize>().ok()).flatten()
    });
    match length {
        Some(length) => body.len() >= length,
        // No length: the body ends with the connection, except where there can be none.
        None => head.starts_with("http/1.1 204") || head.starts_with("http/1.1 304"),
    }
}

fn parse(raw: &[u8]) -> io::Result<Response> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut chunked = false;
    let mut length = None;
    let mut headers = Vec::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if name == "content-length" {
                length = value.parse::<usize>().ok();
            }
            headers.push((name, value.to_owned()));
        }
    }
    let mut body = &raw[end + 4..];
    if chunked {
        let mut out = Vec::new();
        loop {
            let line_end = body.windows(2).position(|w| w == b"\r\n").ok_or_else(|| bad("truncated chunk"))?;
            let size = std::str::from_utf8(&body[..line_end])
                .ok()
                .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or_default().trim(), 16).ok());
            let size = size.ok_or_else(|| bad("bad chunk size"))?;
            body = &body[line_end + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(body.get(..size).ok_or_else(|| bad("truncated chunk"))?);
            body = body.get(size + 2..).unwrap_or_default();
        }
        return Ok(Response { status, headers, body: out });
    }
    if let Some(length) = length {
        body = body.get(..length).unwrap_or(body);
    }
    Ok(Response { status, headers, body: body.to_vec() })
}

/// Why a call of the reviewer API failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The service could not be reached, or the connection failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The service refused the request, saying why.
    #[error("{status}: {}", error.error)]
    Refused {
        /// The status code.
        status: u16,
        /// The body (its text as `error` when the body is not the API's JSON).
        error: ErrorView,
    },
    /// The service accepted the request but its answer is not the expected view.
    #[error("unreadable answer: {0}")]
    Unreadable(#[from] serde_json::Error),
}

impl RequestError {
    /// The status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            RequestError::Refused { status, .. } => Some(*status),
            RequestError::Io(_) | RequestError::Unreadable(_) => None,
        }
    }
}

/// The reviewer API at `base` (e.g. `http://127.0.0.1:8080`) with a reviewer's token.
#[derive(Debug, Clone)]
pub struct ApiClient {
    base: String,
    token: String,
}

impl ApiClient {
    /// A client for `base`, authenticated with `token`.
    pub fn new(base: &str, token: &str) -> Self {
        ApiClient { base: base.trim_end_matches('/').to_owned(), token: token.to_owned() }
    }

    /// `GET base+path`, whatever the answer.
    pub async fn get(&self, path: &str) -> io::Result<Response> {
        let auth = format!("Bearer {}", self.token);
        request("GET", &format!("{}{path}", self.base), &[("Authorization", &auth)], None).await
    }

    /// `POST base+path` with `body` as JSON, whatever the answer.
    pub async fn post(&self, path: &str, body: &impl Serialize) -> io::Result<Response> {
        let auth = format!("Bearer {}", self.token);
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        let body = serde_json::to_vec(body).map_err(io::Error::other)?;
        request("POST", &format!("{}{path}", self.base), &headers, Some(&body)).await
    }

    /// The caller's name and pools.
    pub async fn me(&self) -> Result<ReviewerView, RequestError> {
        view(self.get("/api/me").await?)
    }

    /// The caller's pending tasks, oldest first.
    pub async fn tasks(&self) -> Result<Vec<TaskView>, RequestError> {
        view::<TaskList>(self.get("/api/tasks").await?).map(|list| list.tasks)
    }

    /// Answers a task; the task as decided.
    pub async fn decide(&self, id: &str, decision: &str, explanation: Option<&str>) -> Result<TaskView, RequestError> {
        self.decide_marked(id, decision, explanation, None).await
    }

    /// Answers a task and, with an `incident` note (which may be empty: the explanation is
    /// the note then), marks it as an incident once it is decided; the task as decided.
    pub async fn decide_marked(
        &self,
        id: &str,
        decision: &str,
        explanation: Option<&str>,
        incident: Option<&str>,
    ) -> Result<TaskView, RequestError> {
        let body = DecisionBody {
            decision: decision.to_owned(),
            explanation: explanation.map(str::to_owned),
            arguments: None,
            incident: incident.is_some(),
            note: incident.filter(|note| !note.is_empty()).map(str::to_owned),
        };
        view(self.post(&format!("/api/tasks/{id}/decision"), &body).await?)
    }

    /// Claims a pending task for `seconds` (the service's default when `None`), or extends the
    /// caller's own claim; who holds it, until when.
    pub async fn claim(&self, id: &str, seconds: Option<u64>) -> Result<Claimed, RequestError> {
        view(self.post(&format!("/api/tasks/{id}/claim"), &ClaimBody { seconds }).await?)
    }

    /// Releases the caller's claim on a task (anyone's, with the pool's override).
    pub async fn release(&self, id: &str) -> Result<(), RequestError> {
        let auth = format!("Bearer {}", self.token);
        let url = format!("{}/api/tasks/{id}/claim", self.base);
        let response = request("DELETE", &url, &[("Authorization", &auth)], None).await?;
        if response.status == 204 {
            return Ok(());
        }
        view::<Value>(response).map(drop)
    }

    /// Marks a task, pending or decided, as an incident with `note`; the entry appended.
    pub async fn mark_incident(&self, id: &str, note: Option<&str>) -> Result<IncidentMarked, RequestError> {
        let body = IncidentBody { note: note.map(str::to_owned) };
        view(self.post(&format!("/api/tasks/{id}/incident"), &body).await?)
    }
}

/// A `200` answer read as `T`, or the refusal.
fn view<T: DeserializeOwned>(response: Response) -> Result<T, RequestError> {
    if response.status == 200 {
        return Ok(serde_json::from_slice(&response.body)?);
    }
    let error = serde_json::from_slice(&response.body).unwrap_or_else(|_| ErrorView {
        error: String::from_utf8_lossy(&response.body).into_owned(),
        settled: None,
        claim: None,
    });
    Err(RequestError::Refused { status: response.status, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_read_plain_and_chunked() {
        let plain = parse(b"HTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((plain.status, plain.body.as_slice()), (409, &b"{}"[..]));
        let chunked =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!((chunked.status, chunked.body.as_slice()), (200, &b"abcde"[..]));
    }

    #[test]
    fn refusals_keep_their_status_and_reason() {
        let refused = |body: &[u8]| Response { status: 409, headers: Vec::new(), body: body.to_vec() };
        let body = br#"{"error": "withdrawn by the runner", "reason": "the sample ended"}"#;
        let err = view::<TaskView>(refused(body)).unwrap_err();
        assert_eq!(err.status(), Some(409));
        assert_eq!(err.to_string(), "409: withdrawn by the runner");
        let err =
            view::<TaskView>(Response { status: 502, headers: Vec::new(), body: b"Bad Gateway".to_vec() }).unwrap_err();
        assert_eq!(err.to_string(), "502: Bad Gateway");
        let err = view::<TaskView>(Response { status: 200, headers: Vec::new(), body: b"{}".to_vec() }).unwrap_err();
        assert!(matches!(err, RequestError::Unreadable(_)), "{err}");
    }
}
