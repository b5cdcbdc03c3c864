//! MCP's stdio transport: one JSON-RPC message per line, each way. The proxy's own stdin and
//! stdout when the client starts it, and the pipes of the server command it starts.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::message::{self, Message};
use crate::session::Link;

/// Messages buffered each way between a transport and its session.
pub const BUFFER: usize = 64;

/// The session's link over a line-framed `reader` and `writer`, and the task that writes
/// (done once everything sent was written). A line that is no message is answered with a
/// JSON-RPC error when `answer_invalid` (the client's side), and logged and skipped otherwise.
pub fn pipe<R, W>(reader: R, writer: W, answer_invalid: bool) -> (Link, JoinHandle<io::Result<()>>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_session, from_side) = mpsc::channel(BUFFER);
    let (to_side, outgoing) = mpsc::channel(BUFFER);
    let errors = answer_invalid.then(|| to_side.clone());
    tokio::spawn(read_lines(reader, to_session, errors));
    let writing = tokio::spawn(write_lines(writer, outgoing));
    (Link { tx: to_side, rx: from_side }, writing)
}

async fn read_lines<R: AsyncRead + Unpin>(reader: R, tx: mpsc::Sender<Message>, errors: Option<mpsc::Sender<Message>>) {
    let mut lines = BufReader::new(reader).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(e) => return warn!(error = %e, "Could not read an MCP message."),
        };
        if line.trim().is_empty() {
            continue;
        }
        match message::decode(line.as_bytes()) {
            Ok(messages) => {
                for message in messages {
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
            }
            Err(invalid) => match &errors {
                Some(errors) => {
                    let _ = errors.send(invalid.response()).await;
                }
                None => warn!(error = %invalid, "Skipped a line that is no MCP message."),
            },
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut writer: W, mut rx: mpsc::Receiver<Message>) -> io::Result<()> {
    while let Some(message) = rx.recv().await {
        let mut line = message.to_json();
        line.push('\n');
        writer.write_all(line.as_bytes()).await?;
        if rx.is_empty() {
            writer.flush().await?;
        }
    }
    writer.flush().await?;
    writer.shutdown().await
}

/// A server command the proxy started.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    writing: JoinHandle<io::Result<()>>,
}

/// Starts `program` with `args` as the session's server: its stdin and stdout are the
/// session's link, its stderr the proxy's.
pub fn spawn(program: &str, args: &[String]) -> io::Result<(Link, ServerProcess)> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let (link, writing) = pipe(stdout, stdin, false);
    Ok((link, ServerProcess { child, writing }))
}

impl ServerProcess {
    /// Ends the server as MCP's stdio transport says: its stdin is closed (once the session
    /// dropped its link), then it has `grace` to exit before it is killed.
    pub async fn close(mut self, grace: Duration) -> io::Result<ExitStatus> {
        let _ = self.writing.await;
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                warn!("The MCP server did not exit after its stdin closed; killing it.");
                self.child.kill().await?;
                self.child.wait().await
            }
        }
    }
}
