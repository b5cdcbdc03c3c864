//! The publisher: publishes the requests callers submit, and the request message each call
//! is published (and published again) as.

use std::sync::{Arc, Weak};

use airlock_transport::{Message, Transport, TransportError};
use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::sync::Notify;

use crate::pending::{CallId, TraceHeaders};
use crate::{Inner, lock};

/// Publishes under way at once: a burst of requests waits in the table's outbox (a
/// correlation id each) rather than piling frames up in the connection's buffers.
pub(crate) const MAX_PUBLISHING: usize = 256;

/// Publishes the calls callers submit, in order, [`MAX_PUBLISHING`] at a time; a call whose
/// publish fails is settled with the error. Ends when the client closes or is
/// dropped, once the publishes under way are done.
pub(crate) async fn publish<T: Transport>(weak: Weak<Inner<T>>, wake: Arc<Notify>) {
    let mut publishing = FuturesUnordered::new();
    loop {
        {
            let Some(inner) = weak.upgrade() else { break };
            let mut table = lock(&inner.table);
            if table.is_closed() {
                break;
            }
            while publishing.len() < MAX_PUBLISHING {
                let Some(next) = table.next_to_publish() else { break };
                let inner = inner.clone();
                publishing.push(async move {
                    let message = inner.message(next.correlation, next.request, next.trace);
                    if let Err(error) = inner.transport.publish(&inner.requests, message).await {
                        inner.fail(next.call, error);
                    }
                });
            }
        }
        tokio::select! {
            Some(()) = publishing.next() => {}
            () = wake.notified() => {}
        }
    }
    while publishing.next().await.is_some() {}
}

impl<T: Transport> Inner<T> {
    /// The request message of `correlation`, as published (and published again). Its body
    /// shares the call's request.
    pub(crate) fn message(&self, correlation: String, request: Arc<[u8]>, trace: Option<TraceHeaders>) -> Message {
        Message {
            body: Bytes::from_owner(request),
            correlation_id: Some(correlation),
            reply_to: Some(self.reply_queue.clone()),
            headers: trace.unwrap_or_default(),
            ..Message::default()
        }
    }

    /// Settles a call whose request could not be published: its caller is told why.
    fn fail(&self, call: CallId, error: TransportError) {
        let settled = lock(&self.table).settle(call, Err(error.into()));
        if let Some(settled) = settled {
            settled.wake();
        }
    }
}
