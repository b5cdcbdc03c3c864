//! The UI's live event stream: `added` and `removed` task ids of the caller's pools as they
//! happen, `claimed` when a pending task's claim changes, `resync` when the stream fell
//! behind. It ends when its session ends (logout or
//! expiry; the browser's reconnection then finds no session) and when the service stops: at
//! once for a logout on this process, within [`SESSION_RECHECK`] for one on another process
//! sharing the store.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use super::extract::Session;
use crate::auth::SESSION_RECHECK;
use crate::web::{Change, Web};

/// `GET /events`: server-sent events for a signed-in browser.
pub async fn stream(State(web): State<Arc<Web>>, session: Session) -> Response {
    let pools = session.pools(&web);
    let receiver = web.changes.subscribe();
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + SESSION_RECHECK, SESSION_RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = (receiver, web, session, pools, recheck);
    let stream = futures_util::stream::unfold(state, |(mut receiver, web, session, pools, mut recheck)| async move {
        loop {
            let event = tokio::select! {
                () = web.stop.cancelled() => return None,
                () = session.end.wait() => return None,
                _ = recheck.tick() => match web.sessions.get(&session.id).await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return None,
                    // The store cannot tell now: the next look decides.
                    Err(e) => {
                        tracing::debug!(error = %e, "Rechecking a session failed.");
                        continue;
                    }
                },
                change = receiver.recv() => match change {
                    Ok(change) if pools.iter().any(|p| p == change.pool()) => match change {
                        Change::Added { id, .. } => Event::default().event("added").data(id),
                        Change::Removed { id, .. } => Event::default().event("removed").data(id),
                        Change::Claimed { id, .. } => Event::default().event("claimed").data(id),
                    },
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => Event::default().event("resync").data("lagged"),
                    Err(RecvError::Closed) => return None,
                },
            };
            return Some((Ok::<_, Infallible>(event), (receiver, web, session, pools, recheck)));
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}
