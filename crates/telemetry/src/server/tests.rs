use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::*;

/// Waits that end by themselves are guarded, so that a broken server fails the test instead of
/// hanging it; nothing is asserted about how long they take.
const GUARD: Duration = Duration::from_secs(60);

const PING: &str = "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// Short timeouts, so that a test sees them pass.
fn limits(max_connections: usize) -> ServerLimits {
    ServerLimits {
        header_read_timeout: Duration::from_millis(300),
        body_read_timeout: Duration::from_millis(300),
        max_connections,
    }
}

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

async fn start(limits: ServerLimits, app: Router) -> Server {
    let app = app
        .route("/ping", get(|| async { "pong" }))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, app, limits, async {
        let _ = stopped.await;
    }));
    Server { addr, stop, task }
}

/// Everything the server sends on `stream` until it closes the connection.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let read = tokio::time::timeout(GUARD, stream.read_to_end(&mut received)).await.expect("the server closes");
    // A reset is a close too.
    if let Err(e) = read {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// Sends `request` on a new connection and reads the answer, up to the close.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    until_closed(&mut stream).await
}

#[tokio::test]
async fn idle_and_half_sent_connections_are_closed_and_the_server_stays_reachable() {
    let server = start(limits(16), Router::new()).await;
    let mut held = Vec::new();
    for index in 0..300 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        if index % 2 == 1 {
            stream.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        }
        held.push(stream);
    }
    // Far more sockets than the cap, none finishing a request: a new caller is answered.
    let answer = exchange(server.addr, PING).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("pong"), "{answer}");
    // And every one of them is closed by the server, unanswered.
    for stream in &mut held {
        let rest = until_closed(stream).await;
        assert!(!rest.contains("pong"), "{rest}");
    }
    server.stop.send(()).unwrap();
    tokio::time::timeout(GUARD, server.task).await.expect("the server stops").unwrap();
}

#[tokio::test]
async fn a_connection_over_the_cap_waits_until_one_closes() {
    let server = start(limits(4), Router::new()).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    let answer = exchange(server.addr, PING).await;
    assert!(answer.ends_with("pong"), "{answer}");
    // The fifth connection was served only once an idle one had been closed.
    let closed = idle.iter().filter(|stream| matches!(stream.try_read(&mut [0; 16]), Ok(0))).count();
    assert!(closed >= 1, "the fifth connection was served while the cap's four were open");
}

#[tokio::test]
async fn a_late_body_fails_its_request_and_closes_the_connection() {
    let server = start(limits(4), Router::new()).await;
    let whole =
        exchange(server.addr, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .await;
    assert!(whole.starts_with("HTTP/1.1 200") && whole.ends_with("hello"), "{whole}");
    // Half the body, then nothing.
    let late = exchange(server.addr, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello").await;
    assert!(late.starts_with("HTTP/1.1 400"), "{late}");
    assert!(!late.contains("\r\n\r\nhello"), "{late}");
}

#[tokio::test]
async fn requests_know_their_peer() {
    let server = start(ServerLimits::default(), Router::new()).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let local = stream.local_addr().unwrap();
    stream.write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let answer = until_closed(&mut stream).await;
    assert!(answer.ends_with(&local.to_string()), "{answer}");
}

#[tokio::test]
async fn shutdown_closes_idle_connections_and_finishes_requests_in_progress() {
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let app = Router::new().route(
        "/wait",
        get({
            let (entered, release) = (entered.clone(), release.clone());
            move || async move {
                entered.notify_one();
                release.notified().await;
                "done"
            }
        }),
    );
    let server = start(ServerLimits::default(), app).await;
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    let mut busy = TcpStream::connect(server.addr).await.unwrap();
    busy.write_all(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    entered.notified().await;
    server.stop.send(()).unwrap();
    assert_eq!(until_closed(&mut idle).await, "", "an idle connection is closed at once");
    release.notify_one();
    let answer = until_closed(&mut busy).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"), "{answer}");
    tokio::time::timeout(GUARD, server.task).await.expect("the server stops").unwrap();
}
