//! The HTTP side: one axum [`Router`] built by [`app`], its caller extractor and its errors.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/approvals` | ask for approval of a call |
//! | `POST /v1/reviews` | ask for review of a call's result |
//! | `GET /v1/decisions/{id}` | a decision: `200` once made, `202` while pending |
//! | `POST /v1/hooks/claude-code` | a Claude Code `PreToolUse` or `PostToolUse` hook, answered in its own shape ([`crate::claude_code`]) |
//! | `GET /openapi.json` | the OpenAPI 3.1 document ([`crate::openapi`]) |
//! | `GET /healthz` | `ok` |
//!
//! Every error is JSON `{"error": {"code", "message", "field"?}}`. A [`Caller`] (bearer
//! token, then its rate limit) is an argument of every `/v1` handler, so none can skip the
//! check; it comes before the body is read. Every answer is counted by route and status.

use std::sync::Arc;
use std::time::Duration;

use airlock_policy::Kind;
use airlock_telemetry::metrics::RouteLabels;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query, State};
use axum::handler::Handler;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::answer::{ErrorBody, status_of};
use crate::callback;
use crate::claude_code::{self, HookQuery};
use crate::decisions::{Full, Opened, Outcome, Watch};
use crate::state::Shared;
use crate::submission::{self, Bounds, Invalid, PolicyChoice, Submission};
use crate::tokens::TokenEntry;

/// The route of Claude Code's HTTP hooks.
pub const CLAUDE_CODE_HOOKS: &str = "/v1/hooks/claude-code";
/// The header that names a request's retries.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// RFC 7240's request header (`wait=N`).
pub const PREFER: &str = "prefer";
/// RFC 7240's response header: which preferences were honoured.
pub const PREFERENCE_APPLIED: &str = "preference-applied";

/// One route the gateway serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// `get` or `post`.
    pub method: &'static str,
    /// The path template, `{name}` for a parameter.
    pub path: &'static str,
}

/// Every route, registered where it is listed: [`served`] cannot differ from what [`app`]
/// serves.
struct Routes {
    router: Router<Arc<Shared>>,
    listed: Vec<Route>,
}

impl Routes {
    fn get<H: Handler<T, Arc<Shared>>, T: 'static>(mut self, path: &'static str, handler: H) -> Self {
        self.listed.push(Route { method: "get", path });
        self.router = self.router.route(path, axum::routing::get(handler).layer(middleware::map_response(named(path))));
        self
    }

    fn post<H: Handler<T, Arc<Shared>>, T: 'static>(mut self, path: &'static str, handler: H) -> Self {
        self.listed.push(Route { method: "post", path });
        self.router =
            self.router.route(path, axum::routing::post(handler).layer(middleware::map_response(named(path))));
        self
    }
}

/// The route that answered, as the path template it was registered with.
#[derive(Debug, Clone, Copy)]
struct RouteName(&'static str);

/// Marks a route's answers with its name, for [`count`].
fn named(path: &'static str) -> impl Fn(Response) -> std::future::Ready<Response> + Clone {
    move |mut response: Response| {
        response.extensions_mut().insert(RouteName(path));
        std::future::ready(response)
    }
}

/// Counts every answer by route (`unmatched` for none) and status.
async fn count(State(shared): State<Arc<Shared>>, request: axum::extract::Request, next: Next) -> Response {
    let response = next.run(request).await;
    let route = response.extensions().get::<RouteName>().map_or("unmatched", |name| name.0);
    let labels = RouteLabels { route: route.to_owned(), status: response.status().as_str().to_owned() };
    shared.metrics.gateway_requests.get_or_create(&labels).inc();
    response
}

fn routes() -> Routes {
    Routes { router: Router::new(), listed: Vec::new() }
        .post("/v1/approvals", approvals)
        .post("/v1/reviews", reviews)
        .get("/v1/decisions/{id}", decision)
        .post(CLAUDE_CODE_HOOKS, claude_code_hook)
        .get("/openapi.json", openapi)
        .get("/healthz", health)
}

/// The gateway's routes over `shared`.
pub fn app(shared: Arc<Shared>) -> Router {
    routes()
        .router
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
        })
        .layer(DefaultBodyLimit::max(shared.limits.max_body))
        .layer(middleware::from_fn_with_state(shared.clone(), count))
        .with_state(shared)
}

/// The routes [`app`] serves, in the order they are registered.
pub fn served() -> Vec<Route> {
    routes().listed
}

// === impl Caller ===

/// Who is asking: the entry of the bearer token, within its rate.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The caller's name, which owns its decisions.
    pub name: Arc<str>,
    /// What it may do.
    pub entry: TokenEntry,
}

impl FromRequestParts<Arc<Shared>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, shared: &Arc<Shared>) -> Result<Self, Self::Rejection> {
        let value = parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = value.and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        let entry = token.and_then(|t| shared.tokens.authenticate(t.trim())).ok_or_else(ApiError::unauthorized)?;
        shared.rates.take(&entry.name).map_err(ApiError::rate_limited)?;
        Ok(Caller { name: Arc::from(entry.name.as_str()), entry: entry.clone() })
    }
}

// === handlers ===

async fn approvals(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (id, watch, wait) = submit(&shared, &caller, headers, body, Kind::Approval).await?;
    Ok(respond(&shared, &id, watch, wait).await)
}

async fn reviews(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (id, watch, wait) = submit(&shared, &caller, headers, body, Kind::Review).await?;
    Ok(respond(&shared, &id, watch, wait).await)
}

/// Whether a request's `Content-Type` is JSON (`application/json`, or a `+json` type);
/// none at all is taken as JSON.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return true };
    let essence = value.to_str().unwrap_or_default().split(';').next().unwrap_or_default().trim();
    let essence = essence.to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The body of a JSON request, or why it is refused.
fn json_body(shared: &Shared, headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    let body = body.map_err(|rejection| ApiError::body(rejection, shared.limits.max_body))?;
    if !is_json(headers) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    Ok(body)
}

/// Checks a request and opens its record: its id, its state, and how long to wait for it.
/// The body is read and dropped before anything is awaited, so no waiting request holds it.
async fn submit(
    shared: &Shared,
    caller: &Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    kind: Kind,
) -> Result<(String, Watch, Option<Duration>), ApiError> {
    let body = json_body(shared, &headers, body)?;
    let bounds = Bounds { max_timeout: shared.limits.max_timeout };
    let submission = submission::parse(kind, &body, bounds).map_err(ApiError::invalid)?;
    let size = body.len();
    drop(body);
    permitted(caller, &submission.policy)?;
    if let Some(url) = &submission.callback {
        let Some(webhooks) = &shared.webhooks else {
            return Err(ApiError::callback(
                "callbacks_disabled",
                "callback_url cannot be used: this gateway runs without a webhook secret".into(),
            ));
        };
        webhooks.check(url).await.map_err(|refused| {
            let code = match refused {
                callback::Refused::Unresolved { .. } => "callback_unresolved",
                _ => "callback_forbidden",
            };
            ApiError::callback(code, refused.to_string())
        })?;
    }
    let key = match headers.get(IDEMPOTENCY_KEY) {
        Some(value) => submission::idempotency_key(value.as_bytes())
            .map_err(|invalid| ApiError::new(StatusCode::BAD_REQUEST, "invalid_idempotency_key", invalid.message))?,
        None => submission.default_idempotency_key(),
    };
    let wait = prefer_wait(&headers, shared.limits.max_wait);
    let (id, watch) = open(shared, caller, key, &submission, size).await?;
    Ok((id, watch, wait))
}

/// Whether `caller` may use `policy`.
fn permitted(caller: &Caller, policy: &PolicyChoice) -> Result<(), ApiError> {
    match policy {
        PolicyChoice::Named(name) if !caller.entry.may_use(name) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "policy_forbidden",
            format!("this token may not use the policy '{name}'"),
        )),
        PolicyChoice::Inline(_) if !caller.entry.inline => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "inline_forbidden",
            "this token may not send inline policies (its entry lacks inline: true)",
        )),
        _ => Ok(()),
    }
}

/// Opens the record of `caller`'s `submission` under `key`, sending it to the fleet if new.
async fn open(
    shared: &Shared,
    caller: &Caller,
    key: String,
    submission: &Submission,
    size: usize,
) -> Result<(String, Watch), ApiError> {
    let opened = shared.submit(&caller.name, key, submission, size).await.map_err(|e| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", format!("the request was not taken: {e}"))
    })?;
    match opened {
        Opened::New { id, watch } | Opened::Existing { id, watch } => Ok((id, watch)),
        Opened::Mismatch => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_mismatch",
            "this idempotency key (the Idempotency-Key header, or else the call's kind and key) was used by a \
             different request",
        )),
        Opened::Full(full) => Err(ApiError::full(full)),
    }
}

/// A Claude Code hook (`PreToolUse` or `PostToolUse`, [`claude_code`]): its call is decided
/// by the query's policy and the decision answered in the hook's own shape, `200` whatever
/// the fleet decided or failed to; past the query's timeout (at most the longest wait) the
/// answer fails closed.
async fn claude_code_hook(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    query: Result<Query<HookQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query
        .map_err(|rejection| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_field", rejection.body_text()))?;
    let body = json_body(&shared, &headers, body)?;
    drop(headers);
    let input = claude_code::parse(&body).map_err(ApiError::invalid)?;
    let wait = query.wait(shared.limits.default_timeout, shared.limits.max_wait).map_err(ApiError::invalid)?;
    let submission = input.submission(PolicyChoice::Named(query.policy), wait);
    let size = body.len();
    drop(body);
    permitted(&caller, &submission.policy)?;
    let (_, mut watch) = open(&shared, &caller, submission.default_idempotency_key(), &submission, size).await?;
    tokio::select! {
        _ = tokio::time::timeout(wait, watch.wait_for(Option::is_some)) => {}
        () = shared.stop.cancelled() => {}
    }
    let outcome = watch.borrow().clone();
    let output = match outcome {
        Some(outcome) => claude_code::answer(input.event, &outcome, query.escalated),
        None if shared.stop.is_cancelled() => {
            claude_code::fail_closed(Some(input.event), "Airlock's gateway stopped before the decision came")
        }
        None => claude_code::fail_closed(
            Some(input.event),
            &format!("Airlock had no decision on this call within {} s", wait.as_secs_f64()),
        ),
    };
    Ok(axum::Json(output).into_response())
}

async fn decision(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // An id that is not UTF-8 once decoded names no record; axum's own answer is not JSON.
    let Path(id) =
        id.map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such decision for this token"))?;
    let watch = shared
        .decisions
        .watch(&caller.name, &id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such decision for this token"))?;
    let wait = prefer_wait(&headers, shared.limits.max_wait);
    drop(headers);
    Ok(respond(&shared, &id, watch, wait).await)
}

async fn openapi(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], shared.openapi.clone())
}

async fn health() -> &'static str {
    "ok"
}

/// The record's outcome once there (waiting up to `wait` for it), or `202` with its location.
async fn respond(shared: &Shared, id: &str, mut watch: Watch, wait: Option<Duration>) -> Response {
    if let Some(wait) = wait.filter(|w| !w.is_zero())
        && watch.borrow().is_none()
    {
        tokio::select! {
            _ = tokio::time::timeout(wait, watch.wait_for(Option::is_some)) => {}
            () = shared.stop.cancelled() => {}
        }
    }
    let location = format!("/v1/decisions/{id}");
    let outcome = watch.borrow().clone();
    let mut response = match outcome {
        Some(outcome) => {
            let mut response = match &*outcome {
                Outcome::Decided(decision) => (StatusCode::OK, axum::Json(decision)).into_response(),
                other => {
                    let body = ErrorBody::of_outcome(other).expect("an error outcome");
                    (status_of(other), axum::Json(ErrorView { error: body })).into_response()
                }
            };
            insert(&mut response, header::CONTENT_LOCATION, &location);
            response
        }
        None => {
            let pending = Pending { id, status: "pending", location: &location };
            let mut response = (StatusCode::ACCEPTED, axum::Json(pending)).into_response();
            insert(&mut response, header::LOCATION, &location);
            response
        }
    };
    if let Some(wait) = wait {
        insert(&mut response, PREFERENCE_APPLIED, &format!("wait={}", wait.as_secs()));
    }
    response
}

fn insert(response: &mut Response, name: impl header::IntoHeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

/// The body of a `202`.
#[derive(Debug, Serialize)]
struct Pending<'a> {
    id: &'a str,
    status: &'static str,
    location: &'a str,
}

/// `Prefer: wait=N` (RFC 7240) among the request's preferences, capped at `max`; a value
/// that is not a whole number of seconds is ignored, as an unknown preference is.
pub fn prefer_wait(headers: &HeaderMap, max: Duration) -> Option<Duration> {
    headers
        .get_all(PREFER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|preference| {
            let preference = preference.split(';').next().unwrap_or_default();
            let (name, value) = preference.split_once('=')?;
            let value = value.trim().trim_matches('"');
            name.trim().eq_ignore_ascii_case("wait").then(|| value.parse::<u64>().ok()).flatten()
        })
        .next()
        .map(|seconds| Duration::from_secs(seconds).min(max))
}

// === errors ===

#[derive(Debug, Serialize)]
struct ErrorView {
    error: ErrorBody,
}

/// Why a request failed, with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: ErrorBody { code: code.to_owned(), message: message.into(), field: None },
            retry_after: None,
        }
    }

    fn unauthorized() -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid token is required (Authorization: Bearer …)")
    }

    fn rate_limited(wait: Duration) -> Self {
        let mut error = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "too many requests; slow down");
        error.retry_after = Some(wait.as_secs_f64().ceil().max(1.0) as u64);
        error
    }

    /// A caller with its whole quota pending.
    fn full(full: Full) -> Self {
        let (code, message) = match full {
            Full::Requests { limit } => (
                "too_many_pending",
                format!("this token has {limit} requests pending, the most it may; wait for their decisions"),
            ),
            Full::Bytes { pending, size, limit } => (
                "too_many_pending_bytes",
                format!(
                    "this token's pending requests hold {pending} bytes of bodies, and this one's {size} would pass \
                     its limit of {limit}; wait for their decisions"
                ),
            ),
        };
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message)
    }

    /// A refused `callback_url`.
    fn callback(code: &str, message: String) -> Self {
        let mut error = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message);
        error.body.field = Some("callback_url".into());
        error
    }

    fn body(rejection: BytesRejection, max: usize) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", format!("the body exceeds {max} bytes"))
        } else {
            ApiError::new(rejection.status(), "unreadable_body", rejection.body_text())
        }
    }

    fn invalid(invalid: Invalid) -> Self {
        let (status, code) = if invalid.unreadable {
            (StatusCode::BAD_REQUEST, "invalid_json")
        } else {
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_field")
        };
        let mut error = ApiError::new(status, code, invalid.message);
        error.body.field = invalid.field;
        error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(ErrorView { error: self.body })).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            insert(&mut response, header::RETRY_AFTER, &seconds.to_string());
        }
        response
    }
}

#[cfg(test)]
mod tests;
