//! One MCP session through the proxy: messages between a client [`Link`] and a server
//! [`Link`], everything passed through but `tools/call`.
//!
//! A `tools/call` request is held: a task of its own asks the fleet for approval (with
//! progress notifications to a client that gave a progress token), and, approved, hands the
//! call (modified, for a modify) back to the session to forward; the server's response comes
//! back to that task, which has the result reviewed before the client sees it. Only the
//! session writes to the server and reads the server's responses, so no response reaches
//! the client past the task of the call it answers: a response to a call the client
//! cancelled is dropped, not passed on unreviewed.
//!
//! The session ends when the client goes (`Ok`), when the server goes, or when the fleet
//! terminates a call: that call is answered with a JSON-RPC error first.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_transport::Transport;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::gate::{Approval, Asked, Gate, Review};
use crate::message::{Id, Message, Request, Response, TERMINATED};
use crate::tools::{self, Annotations, ToolCall};

/// The JSON-RPC error code of a `tools/call` whose params are unreadable.
const INVALID_PARAMS: i64 = -32602;

/// One side of a session: what to send it, what it sent.
#[derive(Debug)]
pub struct Link {
    /// Messages for this side.
    pub tx: mpsc::Sender<Message>,
    /// Messages from this side; closed when it is gone.
    pub rx: mpsc::Receiver<Message>,
}

/// How a session ended other than by its client leaving.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ended {
    /// The fleet terminated a call, with this explanation.
    #[error("the Airlock policy ended the session: {0}")]
    Terminated(String),
    /// The server closed its side.
    #[error("the MCP server closed the session")]
    ServerGone,
}

/// What a call's task asks of its session.
enum Event {
    /// Forward this approved request and hand its response back.
    Forward(Request, oneshot::Sender<Response>),
    /// End the session: the fleet terminated a call (already answered).
    Terminate(String),
}

/// A `tools/call` held by the proxy.
struct Held {
    key: v1::CallKey,
    task: AbortHandle,
    /// Set once the call was forwarded: where its response goes.
    reply: Option<oneshot::Sender<Response>>,
}

struct Session<T: Transport> {
    gate: Arc<Gate<T>>,
    run: String,
    progress_every: Duration,
    to_client: mpsc::Sender<Message>,
    to_server: mpsc::Sender<Message>,
    events: mpsc::Sender<Event>,
    annotations: Annotations,
    /// Ids of `tools/list` requests forwarded, whose results name the tools' annotations.
    listings: HashSet<Id>,
    held: HashMap<Id, Held>,
    /// Ids of calls the client cancelled after they were forwarded: their responses are
    /// dropped.
    dropped: HashSet<Id>,
    tasks: JoinSet<()>,
}

/// Runs a session between `client` and `server` until one of them goes or the fleet ends
/// it; progress notifications go out every `progress_every` while a call waits.
pub async fn run<T: Transport>(
    gate: Arc<Gate<T>>,
    progress_every: Duration,
    client: Link,
    server: Link,
) -> Result<(), Ended> {
    let run = format!("mcp-{}", uuid::Uuid::now_v7());
    info!(%run, "MCP session started.");
    let (events, mut events_rx) = mpsc::channel(64);
    let Link { tx: to_client, rx: mut from_client } = client;
    let Link { tx: to_server, rx: mut from_server } = server;
    let mut session = Session {
        gate,
        run,
        progress_every,
        to_client,
        to_server,
        events,
        annotations: Annotations::default(),
        listings: HashSet::new(),
        held: HashMap::new(),
        dropped: HashSet::new(),
        tasks: JoinSet::new(),
    };
    let ended = loop {
        tokio::select! {
            message = from_client.recv() => match message {
                Some(message) => session.on_client(message).await,
                None => break Ok(()),
            },
            message = from_server.recv() => match message {
                Some(message) => session.on_server(message).await,
                None => break Err(Ended::ServerGone),
            },
            Some(event) = events_rx.recv() => match event {
                Event::Forward(request, reply) => session.forward(request, reply).await,
                Event::Terminate(why) => break Err(Ended::Terminated(why)),
            },
            Some(_) = session.tasks.join_next(), if !session.tasks.is_empty() => {}
        }
    };
    session.end().await;
    ended
}

// === impl Session ===

impl<T: Transport> Session<T> {
    async fn on_client(&mut self, message: Message) {
        match message {
            Message::Request(request) if request.method == tools::CALL => self.hold(request),
            Message::Request(request) => {
                if request.method == tools::LIST {
                    self.listings.insert(request.id.clone());
                }
                self.send_server(Message::Request(request)).await;
            }
            Message::Notification(notification) => {
                if notification.method == tools::CANCELLED
                    && let Some(id) = tools::cancelled_id(notification.params.as_ref())
                {
                    self.cancel(id);
                }
                self.send_server(Message::Notification(notification)).await;
            }
            response @ Message::Response(_) => self.send_server(response).await,
        }
    }

    async fn on_server(&mut self, message: Message) {
        let Message::Response(response) = message else { return self.send_client(message).await };
        let Some(id) = response.id.clone() else { return self.send_client(Message::Response(response)).await };
        if let Some(reply) = self.held.get_mut(&id).and_then(|held| held.reply.take()) {
            self.held.remove(&id);
            let _ = reply.send(response);
            return;
        }
        if self.dropped.remove(&id) {
            debug!(%id, "Dropped the response to a cancelled call.");
            return;
        }
        if self.listings.remove(&id)
            && let Ok(result) = &response.outcome
        {
            self.annotations.learn(result);
        }
        self.send_client(Message::Response(response)).await;
    }

    /// Holds a `tools/call` until the fleet decides, in a task of its own.
    fn hold(&mut self, request: Request) {
        let call = match ToolCall::from_params(request.params.as_ref()) {
            Ok(call) => call,
            Err(why) => {
                let refusal = Response::error(request.id, INVALID_PARAMS, why);
                let to_client = self.to_client.clone();
                self.tasks.spawn(async move {
                    let _ = to_client.send(Message::Response(refusal)).await;
                });
                return;
            }
        };
        let asked = Asked::new(&self.run, &self.gate.sample, &request.id, &call, self.annotations.of(&call.name));
        let key = asked.key.clone();
        let id = request.id.clone();
        let progress = Progress {
            token: call.progress_token,
            every: self.progress_every,
            sent: 0,
            to_client: self.to_client.clone(),
        };
        let held = HeldCall { gate: self.gate.clone(), asked, request, progress, events: self.events.clone() };
        let task = self.tasks.spawn(held.run());
        if let Some(earlier) = self.held.insert(id, Held { key, task, reply: None }) {
            // A client that reuses a pending id loses the earlier call; it cannot run unasked.
            earlier.task.abort();
        }
    }

    async fn forward(&mut self, request: Request, reply: oneshot::Sender<Response>) {
        let Some(held) = self.held.get_mut(&request.id) else { return };
        held.reply = Some(reply);
        self.send_server(Message::Request(request)).await;
    }

    /// Stops holding a call the client cancelled, and withdraws it from the fleet.
    fn cancel(&mut self, id: Id) {
        let Some(held) = self.held.remove(&id) else { return };
        held.task.abort();
        if held.reply.is_some() {
            self.dropped.insert(id);
        } else {
            let gate = self.gate.clone();
            self.tasks.spawn(async move { gate.withdraw(&held.key).await });
        }
    }

    async fn send_client(&self, message: Message) {
        let _ = self.to_client.send(message).await;
    }

    async fn send_server(&self, message: Message) {
        if self.to_server.send(message).await.is_err() {
            warn!("The MCP server is gone; a message to it was dropped.");
        }
    }

    /// Stops every held call and withdraws those the fleet still decides on.
    async fn end(mut self) {
        self.tasks.abort_all();
        for held in self.held.values().filter(|held| held.reply.is_none()) {
            self.gate.withdraw(&held.key).await;
        }
        info!(run = %self.run, "MCP session ended.");
    }
}

/// One held call, from its approval to its reviewed result.
struct HeldCall<T: Transport> {
    gate: Arc<Gate<T>>,
    asked: Asked,
    request: Request,
    progress: Progress,
    events: mpsc::Sender<Event>,
}

/// The progress notifications of one call, for a client that gave a token.
struct Progress {
    token: Option<Value>,
    every: Duration,
    /// Notifications sent so far: each carries the next count.
    sent: u64,
    to_client: mpsc::Sender<Message>,
}

impl<T: Transport> HeldCall<T> {
    async fn run(mut self) {
        let gate = self.gate.clone();
        let approval = self
            .progress
            .waiting(gate.approve(&self.asked), "Waiting for the Airlock fleet to approve the call.")
            .await;
        let Request { id, method, params } = self.request.clone();
        let (asked, params) = match approval {
            Approval::Forward(None) => (self.asked.clone(), params),
            Approval::Forward(Some(arguments)) => {
                let params = params.as_ref().map(|params| ToolCall::with_arguments(params, arguments.clone()));
                (self.asked.clone().modified(&arguments), params)
            }
            Approval::Refuse(text) => {
                return self.answer(Response { id: Some(id), outcome: Ok(tools::error_result(&text)) }).await;
            }
            Approval::Terminate(text) => return self.terminate(id, text).await,
        };
        let (reply, response) = oneshot::channel();
        if self.events.send(Event::Forward(Request { id: id.clone(), method, params }, reply)).await.is_err() {
            return;
        }
        let Ok(response) = response.await else { return };
        let Ok(result) = &response.outcome else { return self.answer(response).await };
        let output = tools::output_text(result);
        let review = self
            .progress
            .waiting(gate.review(&asked, &output), "Waiting for the Airlock fleet to review the result.")
            .await;
        match review {
            Review::Pass => self.answer(response).await,
            Review::Replace(text) => {
                self.answer(Response { id: Some(id), outcome: Ok(tools::error_result(&text)) }).await
            }
            Review::Terminate(text) => self.terminate(id, text).await,
        }
    }

    async fn answer(&self, response: Response) {
        let _ = self.progress.to_client.send(Message::Response(response)).await;
    }

    async fn terminate(&self, id: Id, why: String) {
        warn!(call = %self.asked.key.tool_call_id, %why, "The Airlock policy terminated the session.");
        let error = Response::error(id, TERMINATED, format!("The Airlock policy ended the session: {why}"));
        self.answer(error).await;
        let _ = self.events.send(Event::Terminate(why)).await;
    }
}

impl Progress {
    /// Waits for `decision`, telling a client that gave a progress token every `every`.
    async fn waiting<F: Future>(&mut self, decision: F, message: &str) -> F::Output {
        let mut decision = pin!(decision);
        let Some(token) = self.token.clone() else { return decision.await };
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + self.every, self.every);
        loop {
            tokio::select! {
                output = &mut decision => return output,
                _ = ticks.tick() => {
                    self.sent += 1;
                    let _ = self.to_client.send(tools::progress(&token, self.sent, message)).await;
                }
            }
        }
    }
}
