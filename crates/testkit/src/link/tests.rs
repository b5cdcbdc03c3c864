//! The link between two real sockets of the test's own: a client that connects through it
//! and the server it forwards to.

use std::io::ErrorKind;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Bounds every wait: a hang guard, nothing is measured against it.
const GUARD: Duration = Duration::from_secs(30);

/// A link to a server of the test's own, a client connected through it, and the server's side
/// of that connection.
async fn connected() -> (Link, TcpListener, TcpStream, TcpStream) {
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let link = Link::start(server.local_addr().unwrap()).await.unwrap();
    let (client, accepted) = connect(&link, &server).await;
    (link, server, client, accepted)
}

async fn connect(link: &Link, server: &TcpListener) -> (TcpStream, TcpStream) {
    let client = TcpStream::connect(link.addr()).await.unwrap();
    let (accepted, _) = tokio::time::timeout(GUARD, server.accept()).await.expect("the link connects").unwrap();
    (client, accepted)
}

/// Writes `bytes` to `to` and reads them at `from`.
async fn moves(to: &mut TcpStream, from: &mut TcpStream, bytes: &[u8]) {
    to.write_all(bytes).await.unwrap();
    let mut read = vec![0; bytes.len()];
    tokio::time::timeout(GUARD, from.read_exact(&mut read)).await.expect("the bytes arrive").unwrap();
    assert_eq!(read, bytes);
}

/// Whether `stream` is open with nothing to read: not closed (a read of 0), not reset (an
/// error), no bytes waiting.
fn open_and_silent(stream: &TcpStream) -> bool {
    let mut byte = [0; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

/// Writes to `stream` without waiting until its buffers are full; returns how much it took.
async fn fill(stream: &TcpStream) -> usize {
    let chunk = vec![7; 64 * 1024];
    let mut written = 0;
    // A write that would block needs a moment for the kernel to say so for good: writable()
    // stays pending once the peer reads nothing, where try_write keeps failing.
    loop {
        match stream.try_write(&chunk) {
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if tokio::time::timeout(Duration::from_millis(300), stream.writable()).await.is_err() {
                    return written;
                }
            }
            Err(e) => panic!("writing to a frozen link: {e}"),
        }
    }
}

async fn read_error(stream: &mut TcpStream) -> io::Result<usize> {
    let mut buf = [0; 1024];
    tokio::time::timeout(GUARD, stream.read(&mut buf)).await.expect("the read ends")
}

#[tokio::test]
async fn a_frozen_link_keeps_both_sockets_open_moves_nothing_and_thaw_resumes() {
    let (link, _server, mut client, mut accepted) = connected().await;
    moves(&mut client, &mut accepted, b"before").await;

    link.freeze(NewConnections::Pass);
    let before = link.bytes();
    // The client writes until the kernel will take no more: the link reads nothing on, so
    // the server sees none of it and the client's writes block, as on a dead path.
    let written = fill(&client).await;
    assert!(written > 0);
    accepted.write_all(b"to the client").await.unwrap();
    // Both directions held: whatever the link read before it noticed is not written on.
    tokio::task::yield_now().await;
    assert_eq!(link.bytes(), before, "nothing moved through a frozen link");
    assert!(open_and_silent(&accepted), "the server's socket is open and got nothing");
    assert!(open_and_silent(&client), "the client's socket is open and got nothing");
    assert_eq!(link.open(), 1);

    link.thaw();
    let mut got = vec![0; written];
    tokio::time::timeout(GUARD, accepted.read_exact(&mut got)).await.expect("thawed bytes arrive").unwrap();
    assert!(got.iter().all(|&b| b == 7), "every byte written while frozen arrives, in order");
    let mut back = [0; 13];
    tokio::time::timeout(GUARD, client.read_exact(&mut back)).await.expect("the other way too").unwrap();
    assert_eq!(&back, b"to the client");
    moves(&mut accepted, &mut client, b"after").await;
}

#[tokio::test]
async fn reset_gives_econnreset_on_both_sides() {
    let (link, _server, mut client, mut accepted) = connected().await;
    moves(&mut client, &mut accepted, b"hello").await;
    link.reset();
    for (side, stream) in [("client", &mut client), ("server", &mut accepted)] {
        let error = read_error(stream).await.expect_err("a reset, not a clean close");
        assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{side}: {error}");
    }
}

#[tokio::test]
async fn reset_reaches_a_frozen_connection() {
    let (link, _server, mut client, _accepted) = connected().await;
    link.freeze(NewConnections::Pass);
    link.reset();
    let error = read_error(&mut client).await.expect_err("a reset");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset);
}

#[tokio::test]
async fn drop_closes_both_sides_cleanly() {
    let (link, server, mut client, mut accepted) = connected().await;
    moves(&mut accepted, &mut client, b"hello").await;
    link.drop_connections();
    for stream in [&mut client, &mut accepted] {
        assert_eq!(read_error(stream).await.expect("a clean close"), 0, "FIN: the read sees the end");
    }
    // The link itself still forwards.
    let (mut client, mut accepted) = connect(&link, &server).await;
    moves(&mut client, &mut accepted, b"again").await;
}

#[tokio::test]
async fn delay_holds_every_chunk_in_each_direction() {
    let (link, _server, mut client, mut accepted) = connected().await;
    let latency = Duration::from_millis(200);
    link.delay(latency);
    let started = Instant::now();
    moves(&mut client, &mut accepted, b"ping").await;
    let one_way = started.elapsed();
    moves(&mut accepted, &mut client, b"pong").await;
    let round_trip = started.elapsed();
    // A lower bound the link enforces, not a speed: the bytes cannot arrive sooner.
    assert!(one_way >= latency, "one way took {one_way:?}");
    assert!(round_trip >= 2 * latency, "the round trip took {round_trip:?}");

    link.delay(Duration::ZERO);
    moves(&mut client, &mut accepted, b"undelayed").await;
}

#[tokio::test]
async fn a_frozen_link_passes_freezes_or_refuses_new_connections_as_chosen() {
    let (link, server, _client, _accepted) = connected().await;

    link.freeze(NewConnections::Pass);
    let (mut client, mut accepted) = connect(&link, &server).await;
    moves(&mut client, &mut accepted, b"a fresh path").await;

    link.freeze(NewConnections::Freeze);
    let (frozen_client, mut frozen_accepted) = connect(&link, &server).await;
    frozen_client.try_write(b"held").unwrap();
    // Time for the bytes to cross, were the link not frozen.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(open_and_silent(&frozen_accepted) && open_and_silent(&frozen_client), "a new connection is frozen too");
    // The connection that passed is frozen now with the rest.
    client.write_all(b"held too").await.unwrap();
    assert!(open_and_silent(&accepted));

    link.freeze(NewConnections::Refuse);
    let mut refused = TcpStream::connect(link.addr()).await.unwrap();
    let error = read_error(&mut refused).await.expect_err("refused");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset);

    link.thaw();
    let mut held = [0; 4];
    tokio::time::timeout(GUARD, frozen_accepted.read_exact(&mut held)).await.unwrap().unwrap();
    assert_eq!(&held, b"held");
    assert_eq!(link.accepted(), 4);
}

#[tokio::test]
async fn a_broker_url_keeps_its_user_vhost_and_query_and_points_at_the_link() {
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    let link = Link::to_broker(&format!("amqp://alice:s3cret@localhost:{port}/fleet?heartbeat=2")).await.unwrap();
    assert_eq!(link.target(), server.local_addr().unwrap());
    assert_eq!(link.url(), format!("amqp://alice:s3cret@{}/fleet?heartbeat=2", link.addr()));
    let bare = Link::to_broker(&format!("amqp://127.0.0.1:{port}")).await.unwrap();
    assert_eq!(bare.url(), format!("amqp://{}", bare.addr()));

    for bad in ["127.0.0.1:5672", "amqp:///vhost", "amqp://a:1/%2f,amqp://b:2/%2f"] {
        let error = Link::to_broker(bad).await.expect_err(bad);
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{bad}: {error}");
    }
}
