//! A webhook receiver for the tests, and the receiver's side of a Standard Webhooks
//! signature, checked with an HMAC of the tests' own rather than the services' code.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use airlock_webhook::{RetryPolicy, WebhookSecret};
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use tokio::sync::mpsc;

/// One attempt a receiver saw.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature`.
    pub signature: String,
    /// The body as sent.
    pub body: Vec<u8>,
}

/// A receiver at `/{path}` that records every attempt and refuses the first `failures` of
/// them (503).
pub fn receiver(path: &str, failures: u32) -> (axum::Router, mpsc::UnboundedReceiver<Attempt>) {
    let (attempts, seen) = mpsc::unbounded_channel::<Attempt>();
    let failures = Arc::new(Mutex::new(failures));
    let route = axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
        let (attempts, failures) = (attempts.clone(), failures.clone());
        async move {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            let attempt = Attempt {
                id: header("webhook-id"),
                timestamp: header("webhook-timestamp"),
                signature: header("webhook-signature"),
                body: body.to_vec(),
            };
            let _ = attempts.send(attempt);
            let mut failures = failures.lock().unwrap();
            if *failures > 0 {
                *failures -= 1;
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::NO_CONTENT
            }
        }
    });
    (axum::Router::new().route(&format!("/{path}"), route), seen)
}

/// Retries a test waits little for: 20 ms, then up to 100 ms apart, for a minute.
pub fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        period: Duration::from_secs(60),
        attempt_timeout: Duration::from_secs(10),
    }
}

/// Serves `router` at `addr` (port 0: any free port) in the background; the address taken.
pub async fn serve(router: axum::Router, addr: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// Whether `attempt` carries a Standard Webhooks signature by `secret`: an HMAC-SHA256, keyed
/// by the secret's base64 part, over `{id}.{timestamp}.{body}`.
pub fn signed_by(secret: &WebhookSecret, attempt: &Attempt) -> bool {
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine.decode(secret.to_string().strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.", attempt.id, attempt.timestamp).as_bytes());
    mac.update(&attempt.body);
    let expected = format!("v1,{}", engine.encode(mac.finalize().into_bytes()));
    attempt.signature.split(' ').any(|s| s == expected)
}
