//! The UI's live event stream: `added` and `removed` task ids of the caller's pools as they
//! happen, `resync` when the stream fell behind. It ends when its session ends (logout or
//! expiry; the browser's reconnection then finds no session) and when the service stops.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use super::extract::Session;
use crate::shared::{Change, Shared};

/// `GET /events`: server-sent events for a signed-in browser.
pub async fn stream(State(shared): State<Arc<Shared>>, session: Session) -> Response {
    let pools = session.pools(&shared);
    let receiver = shared.changes.subscribe();
    let stop = shared.stop.clone();
    let end = session.end;
    let state = (receiver, stop, end, pools);
    let stream = futures_util::stream::unfold(state, |(mut receiver, stop, end, pools)| async move {
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return None,
                () = end.wait() => return None,
                change = receiver.recv() => match change {
                    Ok(change) if pools.iter().any(|p| p == change.pool()) => match change {
                        Change::Added { id, .. } => Event::default().event("added").data(id),
                        Change::Removed { id, .. } => Event::default().event("removed").data(id),
                    },
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => Event::default().event("resync").data("lagged"),
                    Err(RecvError::Closed) => return None,
                },
            };
            return Some((Ok::<_, Infallible>(event), (receiver, stop, end, pools)));
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}
