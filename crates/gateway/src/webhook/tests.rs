//! The gateway's webhook deliveries: given up past their period, never to a private address, left
//! in the log by a stopping gateway.

use std::time::Duration;

use airlock_telemetry::metrics::OutcomeLabels;

use super::log::tests::TempLog;
use super::*;

/// Nothing listens there: every attempt fails.
const DOWN: &str = "http://127.0.0.1:1/hook";

fn count(metrics: &Metrics, outcome: &str) -> u64 {
    metrics.webhook_deliveries.get_or_create(&OutcomeLabels { outcome: outcome.to_owned() }).get()
}

#[tokio::test]
async fn a_delivery_failing_past_its_period_is_given_up_counted_and_gone_from_the_log() {
    let file = TempLog::new();
    let log = DeliveryLog::open(&file.0).await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let retry = RetryPolicy { period: Duration::ZERO, ..RetryPolicy::default() };
    let webhooks =
        Webhooks::new(WebhookSecret::generate(), retry, metrics.clone(), true).unwrap().with_log(log.clone());
    webhooks.send(&DOWN.parse().unwrap(), "w1", b"{}".to_vec(), &CancellationToken::new()).await;
    assert_eq!(log.pending().await.unwrap(), Vec::new());
    assert_eq!((count(&metrics, "given_up"), count(&metrics, "retried")), (1, 0));
    assert_eq!(metrics.webhook_backlog.get(), 0);
    log.close().await;
}

#[tokio::test]
async fn at_send_time_a_private_address_is_never_connected_to_by_name_or_as_written() {
    // A receiver on loopback, as a name rebound to 127.0.0.1 after it was checked would be.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let metrics = Arc::new(Metrics::new());
    let retry = RetryPolicy { period: Duration::ZERO, ..RetryPolicy::default() };
    let webhooks = Webhooks::new(WebhookSecret::generate(), retry, metrics.clone(), false).unwrap();
    for url in [format!("http://localhost:{port}/hook"), format!("http://127.0.0.1:{port}/hook")] {
        webhooks.send(&url.parse().unwrap(), "w1", b"{}".to_vec(), &CancellationToken::new()).await;
    }
    assert_eq!(count(&metrics, "given_up"), 2);
    assert_eq!(count(&metrics, "delivered"), 0);
    // Every attempt is over: a connection made would be waiting to be accepted.
    let accepted = tokio::time::timeout(Duration::ZERO, listener.accept()).await;
    assert!(accepted.is_err(), "nothing connected to the receiver");
}

#[tokio::test]
async fn a_stopping_gateway_leaves_a_delivery_awaiting_its_retry_in_the_log() {
    let file = TempLog::new();
    let log = DeliveryLog::open(&file.0).await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let retry = RetryPolicy { first_delay: Duration::from_secs(3600), ..RetryPolicy::default() };
    let webhooks =
        Webhooks::new(WebhookSecret::generate(), retry, metrics.clone(), true).unwrap().with_log(log.clone());
    let stop = CancellationToken::new();
    stop.cancel();
    webhooks.send(&DOWN.parse().unwrap(), "w1", b"{\"x\":1}".to_vec(), &stop).await;
    let left = log.pending().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!((left[0].id.as_str(), left[0].url.as_str(), &left[0].body[..]), ("w1", DOWN, &b"{\"x\":1}"[..]));
    assert_eq!(left[0].attempts, 1);
    assert!(left[0].next_attempt > left[0].first_attempt);
    assert_eq!((count(&metrics, "retried"), metrics.webhook_backlog.get()), (1, 1));
    log.close().await;

    // The next start resumes it, with its count of attempts, and counts it in its backlog.
    let metrics = Arc::new(Metrics::new());
    let log = DeliveryLog::open(&file.0).await.unwrap();
    let webhooks =
        Webhooks::new(WebhookSecret::generate(), retry, metrics.clone(), true).unwrap().with_log(log.clone());
    assert_eq!(webhooks.resume().await.unwrap(), left);
    assert_eq!(metrics.webhook_backlog.get(), 1);
    log.close().await;
}
