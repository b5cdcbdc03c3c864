//! A network link of a test's own between a role and its broker: a TCP forwarder on
//! `127.0.0.1:0` in front of the broker's address, whose faults the test injects while the
//! role runs. What the suites try with it are the faults a real network has and a killed
//! process or a closed connection does not show:
//!
//! - [`Link::freeze`]: no byte moves in either direction, and both sockets stay open (no FIN,
//!   no RST): a half-open link, as after a cable pull, a VM pause or a stateful firewall that
//!   dropped the flow. Neither end learns of it but by a timeout of its own (heartbeats,
//!   keepalive, a deadline). What the link does with connections made while it is frozen is
//!   the test's choice ([`NewConnections`]).
//! - [`Link::thaw`]: bytes move again, in order, nothing lost.
//! - [`Link::drop_connections`]: both sides closed cleanly (FIN), as a peer that closed.
//! - [`Link::reset`]: both sides reset (RST), as a middlebox that gave up on the flow.
//! - [`Link::delay`]: every chunk held for a while in each direction, as a slow path.
//!
//! Each acts on every connection through the link at that moment; the link keeps accepting.
//! The forwarder reads from one side only when it may write to the other, so a frozen link
//! pushes back as a dead path does: the kernel's buffers fill and the sender's writes block.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How many chunks a direction may hold between reading and writing them: a delayed
/// link keeps a window in flight, and a frozen one stops reading once it is full.
const CHUNKS_IN_FLIGHT: usize = 64;

/// The largest chunk read at once.
const CHUNK: usize = 16 * 1024;

/// How long a dropped connection waits for its peers to close their side after its FIN,
/// before it closes anyway: a socket closed with unread bytes sends RST, not the FIN asked for.
const DROP_LINGER: Duration = Duration::from_secs(5);

/// What a frozen link does with a connection made while it is frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewConnections {
    /// Accepted and forwarded as usual: only the connections of the moment are frozen, as a
    /// stateful firewall that lost one flow; a role that reconnects gets a fresh path.
    Pass,
    /// Accepted, connected to the target and frozen at once: the path itself is dead, so a
    /// reconnect hangs in its handshake until its own timeout.
    Freeze,
    /// Accepted and reset at once (RST): the path refuses, so a reconnect fails fast and
    /// tries again.
    Refuse,
}

/// What one connection through the link does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Flowing,
    Frozen,
    Dropped,
    Reset,
}

/// A running link; the forwarder and every connection through it end when it is dropped.
#[derive(Debug)]
pub struct Link {
    local: SocketAddr,
    target_url: Option<String>,
    shared: Arc<Shared>,
    accepting: JoinHandle<()>,
}

/// What the accept loop and the handle share.
#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    /// One sender per live connection: its fate.
    connections: Mutex<Vec<watch::Sender<Fate>>>,
    /// While the link is frozen, what it does with a new connection.
    frozen: Mutex<Option<NewConnections>>,
    delay: watch::Sender<Duration>,
    accepted: AtomicU64,
    to_target: AtomicU64,
    from_target: AtomicU64,
}

impl Link {
    /// Starts a link to `target` on a port of its own on `127.0.0.1`.
    pub async fn start(target: SocketAddr) -> io::Result<Link> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target,
            connections: Mutex::default(),
            frozen: Mutex::default(),
            delay: watch::Sender::new(Duration::ZERO),
            accepted: AtomicU64::new(0),
            to_target: AtomicU64::new(0),
            from_target: AtomicU64::new(0),
        });
        let accepting = tokio::spawn(accept(listener, shared.clone()));
        Ok(Link { local, target_url: None, shared, accepting })
    }

    /// Starts a link in front of the broker at `url` (`amqp://user:password@host:port/vhost?…`,
    /// one node); [`url`](Self::url) is then the URL a role connects through it with.
    pub async fn to_broker(url: &str) -> io::Result<Link> {
        let (_, authority, _) = split_url(url)?;
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, host_port)| host_port);
        let default_port = if url.starts_with("amqps://") { 5671 } else { 5672 };
        let host_port =
            if host_port.contains(':') { host_port.to_owned() } else { format!("{host_port}:{default_port}") };
        let target = tokio::net::lookup_host(&host_port)
            .await?
            .find(SocketAddr::is_ipv4)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{host_port} has no IPv4 address")))?;
        let mut link = Link::start(target).await?;
        link.target_url = Some(url.to_owned());
        Ok(link)
    }

    /// The address a client connects to.
    pub fn addr(&self) -> SocketAddr {
        self.local
    }

    /// The address the link forwards to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// The broker URL through the link: the target URL's user, password, vhost and query,
    /// this link's address. Panics for a link made with [`start`](Self::start).
    pub fn url(&self) -> String {
        let url = self.target_url.as_deref().expect("a link made with Link::to_broker");
        let (scheme, authority, rest) = split_url(url).expect("checked when the link started");
        let user = authority.rsplit_once('@').map(|(user, _)| format!("{user}@")).unwrap_or_default();
        format!("{scheme}://{user}{}{rest}", self.local)
    }

    /// Stops every byte on every current connection, both ways, keeping both sockets open;
    /// connections made until [`thaw`](Self::thaw) are treated as `new` says.
    pub fn freeze(&self, new: NewConnections) {
        *lock(&self.shared.frozen) = Some(new);
        self.shared.set_fate(Fate::Frozen);
    }

    /// Lets bytes move again on every connection, in order, and new connections flow.
    pub fn thaw(&self) {
        *lock(&self.shared.frozen) = None;
        self.shared.set_fate(Fate::Flowing);
    }

    /// Closes every current connection on both sides with FIN; new ones are accepted.
    pub fn drop_connections(&self) {
        self.shared.set_fate(Fate::Dropped);
    }

    /// Resets every current connection on both sides (RST: `SO_LINGER` 0, then close); new
    /// ones are accepted.
    pub fn reset(&self) {
        self.shared.set_fate(Fate::Reset);
    }

    /// Holds every chunk read from now on for `latency` before writing it on, in each
    /// direction (`Duration::ZERO`: no delay). Chunks keep their order, and a window of them
    /// is in flight at once, so the delay adds latency without cutting throughput to a chunk
    /// per `latency`.
    pub fn delay(&self, latency: Duration) {
        self.shared.delay.send_replace(latency);
    }

    /// How many connections the link has accepted since it started.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// How many connections through the link are open now.
    pub fn open(&self) -> usize {
        let mut connections = lock(&self.shared.connections);
        connections.retain(|fate| !fate.is_closed());
        connections.len()
    }

    /// Bytes written on to the target so far, and bytes written back from it.
    pub fn bytes(&self) -> (u64, u64) {
        (self.shared.to_target.load(Ordering::Relaxed), self.shared.from_target.load(Ordering::Relaxed))
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The accept loop owns every connection's task: ending it ends them.
        self.accepting.abort();
    }
}

// === impl Shared ===

impl Shared {
    fn set_fate(&self, fate: Fate) {
        let mut connections = lock(&self.connections);
        connections.retain(|sender| !sender.is_closed());
        for sender in connections.iter() {
            sender.send_replace(fate);
        }
    }
}

/// Accepts connections until the link is dropped, each served by a task of its own.
async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let mut serving = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                shared.accepted.fetch_add(1, Ordering::Relaxed);
                let frozen = *lock(&shared.frozen);
                if frozen == Some(NewConnections::Refuse) {
                    reset_now(client);
                    continue;
                }
                let fate = watch::Sender::new(if frozen == Some(NewConnections::Freeze) { Fate::Frozen } else { Fate::Flowing });
                let watching = fate.subscribe();
                lock(&shared.connections).push(fate);
                serving.spawn(serve(client, shared.clone(), watching));
            }
            // Reap finished connections so a long-lived link does not keep them.
            Some(_) = serving.join_next(), if !serving.is_empty() => {}
        }
    }
}

/// Forwards one connection until both sides have closed, or the link drops or resets it.
async fn serve(mut client: TcpStream, shared: Arc<Shared>, mut fate: watch::Receiver<Fate>) {
    let Ok(mut upstream) = TcpStream::connect(shared.target).await else {
        // The target refused: so does the link.
        reset_now(client);
        return;
    };
    let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
    let ending = {
        let (client_read, client_write) = client.split();
        let (upstream_read, upstream_write) = upstream.split();
        let up = pump(client_read, upstream_write, fate.clone(), &shared.delay, &shared.to_target);
        let down = pump(upstream_read, client_write, fate.clone(), &shared.delay, &shared.from_target);
        tokio::select! {
            // Both sides closed: what is left is closing ours. A reset (or any error) on one
            // side is passed on as a reset to the other.
            ended = async { tokio::try_join!(up, down) } => if ended.is_ok() { Fate::Dropped } else { Fate::Reset },
            ending = fate.wait_for(|fate| matches!(fate, Fate::Dropped | Fate::Reset)) => {
                ending.map_or(Fate::Dropped, |fate| *fate)
            }
        }
    };
    match ending {
        Fate::Reset => {
            reset_now(client);
            reset_now(upstream);
        }
        _ => {
            let _ = tokio::time::timeout(DROP_LINGER, async {
                tokio::join!(close_cleanly(&mut client), close_cleanly(&mut upstream))
            })
            .await;
        }
    }
}

/// Copies `from` to `to` in chunks, each held for the link's delay at the moment it was read,
/// reading only while the connection flows and writing only while it flows. Ends at `from`'s
/// end (passed on as FIN) or at an error.
async fn pump(
    mut from: ReadHalf<'_>,
    mut to: WriteHalf<'_>,
    fate: watch::Receiver<Fate>,
    delay: &watch::Sender<Duration>,
    counter: &AtomicU64,
) -> io::Result<()> {
    let (chunks, mut queued) = mpsc::channel::<(Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT);
    let (mut reading_fate, mut writing_fate) = (fate.clone(), fate);
    let reading = async move {
        loop {
            flowing(&mut reading_fate).await;
            let mut chunk = vec![0; CHUNK];
            let read = from.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            chunk.truncate(read);
            let due = Instant::now() + *delay.borrow();
            if chunks.send((due, chunk)).await.is_err() {
                return Ok(());
            }
        }
    };
    let writing = async move {
        while let Some((due, chunk)) = queued.recv().await {
            tokio::time::sleep_until(due).await;
            flowing(&mut writing_fate).await;
            to.write_all(&chunk).await?;
            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        to.shutdown().await
    };
    tokio::try_join!(reading, writing).map(|_| ())
}

/// Waits while the connection is frozen; returns at once when it flows (or ends: then the
/// connection's task is ending it).
async fn flowing(fate: &mut watch::Receiver<Fate>) {
    let _ = fate.wait_for(|fate| *fate != Fate::Frozen).await;
}

/// Sends FIN, then reads what the peer still sends until it closes too, so the close stays
/// clean.
async fn close_cleanly(stream: &mut TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0; CHUNK];
    while let Ok(read) = stream.read(&mut sink).await {
        if read == 0 {
            break;
        }
    }
}

/// Closes `stream` with RST.
fn reset_now(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// A URL's scheme, authority and the rest (path and query, with its leading `/` or `?`).
fn split_url(url: &str) -> io::Result<(&str, &str, &str)> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "a broker URL is scheme://[user@]host[:port][/vhost]");
    let (scheme, after) = url.split_once("://").ok_or_else(invalid)?;
    if url.contains(',') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a link stands in front of one node, not a list"));
    }
    let end = after.find(['/', '?']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    if authority.is_empty() {
        return Err(invalid());
    }
    Ok((scheme, authority, rest))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
