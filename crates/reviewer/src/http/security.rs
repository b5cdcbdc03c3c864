//! The headers every response carries: a strict Content-Security-Policy (scripts and styles
//! from this origin only, nothing inline, no frames), `nosniff`, no referrer to other sites,
//! and no caching unless a route says otherwise. With a public URL, requests for any other
//! `Host` are refused.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::web::Web;

/// The route that answers whatever the `Host` (probes address the service by its own address).
pub const HEALTH: &str = "/healthz";

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the security headers to a response (the router's outermost layer).
pub async fn headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // `same-origin`, not `no-referrer`: with the latter browsers send `Origin: null` on the
    // UI's own form posts, which the origin check must refuse.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// Refuses with `421 Misdirected Request` (the service does not answer for that authority) a
/// request whose `Host` is not the public URL's, when one is set; [`HEALTH`] is exempt.
pub async fn host(State(web): State<Arc<Web>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok());
    if request.uri().path() == HEALTH || web.site.serves_host(host) {
        return next.run(request).await;
    }
    ApiError::Misdirected.into_response()
}
