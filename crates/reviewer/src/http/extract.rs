//! Who is asking, as axum extractors, so a handler that takes one cannot skip its check:
//!
//! - [`Reviewer`]: the API's caller, named by an `Authorization: Bearer` token;
//! - [`Admin`]: an API caller whose reviewer is an admin;
//! - [`Session`]: a signed-in browser, named by the session cookie (`Option<Session>` for the
//!   pages that show the login instead);
//! - [`SameOrigin`]: a request the browser says comes from this very origin;
//! - [`CsrfForm`]: a state-changing form post of a session, from this origin, carrying the
//!   session's CSRF token.
//!
//! Each refuses with the [`ApiError`] the handlers used to return themselves: `401` without a
//! valid token or session, `403` from another origin or without the CSRF token. Each reads
//! only the [`Web`] side of whatever state the router has.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, FromRequest, FromRequestParts, OptionalFromRequest, OptionalFromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::auth::{self, CSRF_HEADER, Reviewer, SessionEnd};
use crate::web::Web;

/// The API's caller: the reviewer whose token the `Authorization: Bearer` header carries.
impl<S: Send + Sync> FromRequestParts<S> for Reviewer
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let web = Arc::<Web>::from_ref(state);
        let value =
            parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or(ApiError::Unauthorized)?;
        let token =
            value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).ok_or(ApiError::Unauthorized)?;
        web.reviewers.authenticate(token).cloned().ok_or(ApiError::Unauthorized)
    }
}

// === impl Admin ===

/// An API caller whose reviewer is an admin (`admin: true` in the tokens file): `401` without
/// a valid token, `403` for any other reviewer.
#[derive(Debug, Clone)]
pub struct Admin(pub Reviewer);

impl<S: Send + Sync> FromRequestParts<S> for Admin
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let reviewer = Reviewer::from_request_parts(parts, state).await?;
        if !reviewer.admin {
            return Err(ApiError::Forbidden(NOT_ADMIN));
        }
        Ok(Admin(reviewer))
    }
}

/// Why a reviewer who is no admin is refused an admin's page or route.
pub const NOT_ADMIN: &str = "only an admin may see this";

// === impl Session ===

/// A signed-in browser: the live session its cookie names, and that session's reviewer.
#[derive(Debug, Clone)]
pub struct Session {
    /// The session's id (the cookie's value).
    pub id: String,
    /// The token the session's forms and scripts must echo.
    pub csrf: String,
    /// Who signed in.
    pub reviewer: Reviewer,
    /// When the session ends.
    pub end: SessionEnd,
}

impl Session {
    /// The session of the request's cookie, if it is live and its reviewer still listed with
    /// the token the session was opened with; an error when the store cannot tell.
    async fn of(headers: &HeaderMap, web: &Web) -> Result<Option<Self>, ApiError> {
        let cookies = headers.get_all(header::COOKIE);
        let name = web.site.session_cookie();
        let Some(id) = cookies.iter().filter_map(|v| v.to_str().ok()).find_map(|h| auth::cookie(h, name)) else {
            return Ok(None);
        };
        let Some(entry) = web.sessions.get(id).await? else { return Ok(None) };
        let Some(reviewer) = web.reviewers.by_name(&entry.reviewer).filter(|r| r.holds_token(&entry.token_sha256))
        else {
            return Ok(None);
        };
        Ok(Some(Session { id: id.to_owned(), csrf: entry.csrf, reviewer: reviewer.clone(), end: entry.end }))
    }

    /// The session's reviewer's pools among those the service serves.
    pub fn pools(&self, web: &Web) -> Vec<String> {
        self.reviewer.pools_among(&web.pools)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Session
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Session::of(&parts.headers, &Arc::<Web>::from_ref(state)).await?.ok_or(ApiError::Unauthorized)
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for Session
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Option<Self>, Self::Rejection> {
        Session::of(&parts.headers, &Arc::<Web>::from_ref(state)).await
    }
}

// === impl SameOrigin ===

/// A request from this very origin: its `Origin` names the UI's origin (the public URL's, else
/// the host it was sent to) or, when the browser sends no `Origin`, its `Sec-Fetch-Site` (if
/// any) says `same-origin` or `none`.
#[derive(Debug, Clone, Copy)]
pub struct SameOrigin;

impl SameOrigin {
    fn check(headers: &HeaderMap, web: &Web) -> Result<Self, ApiError> {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !web.site.same_origin(origin, host) {
                return Err(ApiError::Forbidden("cross-origin request refused"));
            }
        } else if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
            && !matches!(site, "same-origin" | "none")
        {
            return Err(ApiError::Forbidden("cross-site request refused"));
        }
        Ok(SameOrigin)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SameOrigin
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        SameOrigin::check(&parts.headers, &Arc::<Web>::from_ref(state))
    }
}

// === impl CsrfForm ===

/// A state-changing form post of a signed-in browser, from this origin, carrying the session's
/// CSRF token (the `X-CSRF-Token` header, else the form's `csrf` field), with the form's fields
/// read as `T`.
///
/// Refused, in this order: `401` without a session, `400` when the form cannot be read, `403`
/// from another origin, `403` without the right token. As `Option<CsrfForm<T>>` it is `None`
/// without a session, and refused as above otherwise.
#[derive(Debug)]
pub struct CsrfForm<T> {
    /// The session that posted.
    pub session: Session,
    /// The form's fields.
    pub form: T,
}

/// The CSRF token of a form, beside its other fields.
#[derive(Debug, Deserialize)]
struct CsrfField {
    #[serde(default)]
    csrf: Option<String>,
}

impl<T: DeserializeOwned> CsrfForm<T> {
    /// Reads and checks the post of `session`.
    async fn read(session: Session, web: &Web, parts: Parts, body: axum::body::Body) -> Result<Self, Response> {
        let sent_header = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let origin = SameOrigin::check(&parts.headers, web);
        let body =
            Bytes::from_request(Request::from_parts(parts, body), &()).await.map_err(IntoResponse::into_response)?;
        let form: T = form(&body).map_err(IntoResponse::into_response)?;
        let CsrfField { csrf } = self::form(&body).map_err(IntoResponse::into_response)?;
        origin.map_err(IntoResponse::into_response)?;
        let sent = sent_header.as_deref().or(csrf.as_deref()).unwrap_or_default();
        if !auth::constant_time_eq(sent.as_bytes(), session.csrf.as_bytes()) {
            return Err(ApiError::Forbidden("missing or wrong CSRF token; reload the page").into_response());
        }
        Ok(CsrfForm { session, form })
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequest<S> for CsrfForm<T>
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let web = Arc::<Web>::from_ref(state);
        let (parts, body) = request.into_parts();
        let session = Session::of(&parts.headers, &web)
            .await
            .map_err(IntoResponse::into_response)?
            .ok_or_else(|| ApiError::Unauthorized.into_response())?;
        CsrfForm::read(session, &web, parts, body).await
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Send> OptionalFromRequest<S> for CsrfForm<T>
where
    Arc<Web>: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        let web = Arc::<Web>::from_ref(state);
        let (parts, body) = request.into_parts();
        match Session::of(&parts.headers, &web).await.map_err(IntoResponse::into_response)? {
            Some(session) => CsrfForm::read(session, &web, parts, body).await.map(Some),
            None => Ok(None),
        }
    }
}

/// A form body (`application/x-www-form-urlencoded`) read as `T`; unknown fields are ignored.
pub fn form<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_urlencoded::from_bytes(body).map_err(|e| ApiError::BadRequest(format!("cannot read the form: {e}")))
}
