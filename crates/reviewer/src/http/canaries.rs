//! Canaries over HTTP, for admins only: the API's `GET /api/canaries` and the UI's Canaries
//! page, each the catch rates of the admin's pools among the service's. Any other reviewer
//! gets `403`; nothing of a canary is in any other route's answer.

use std::sync::Arc;

use airlock_records::review::canary::CanaryReport;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::ApiError;
use super::extract::{Admin, NOT_ADMIN, Session};
use super::ui::viewer;
use crate::canary::report::report;
use crate::ui::pages;
use crate::web::Web;

/// The newest canaries counted in the catch rates.
pub const COUNTED: u32 = 10_000;
/// The canaries listed one by one unless the caller asks for another number.
pub const LISTED: u32 = 100;

/// The query of `GET /api/canaries`.
#[derive(Debug, Deserialize)]
pub struct CanariesQuery {
    /// How many canaries to list one by one (0 to 1000; [`LISTED`] when absent); the rates
    /// count the newest [`COUNTED`] whatever it is.
    limit: Option<u32>,
}

/// `GET /api/canaries`: the catch rates of the admin's pools, per pool and per reviewer, and
/// the newest canaries with every answer given to them.
pub async fn list(
    State(web): State<Arc<Web>>,
    Admin(admin): Admin,
    Query(query): Query<CanariesQuery>,
) -> Result<Json<CanaryReport>, ApiError> {
    let listed = query.limit.unwrap_or(LISTED).min(1000);
    Ok(Json(catch_rates(&web, &admin.pools_among(&web.pools), listed).await?))
}

/// `GET /canaries`: the Canaries page for an admin, `403` for any other reviewer, or back to
/// the login without a session.
pub async fn page(State(web): State<Arc<Web>>, session: Option<Session>) -> Result<Response, ApiError> {
    let Some(session) = session else {
        return Ok(Redirect::to("/").into_response());
    };
    if !session.reviewer.admin {
        let status = StatusCode::FORBIDDEN;
        return Ok((status, Html(pages::error(status.as_str(), &format!("{NOT_ADMIN}.")))).into_response());
    }
    let pools = session.pools(&web);
    let report = catch_rates(&web, &pools, LISTED).await?;
    Ok(Html(pages::canaries(&viewer(&session, &pools), &report)).into_response())
}

/// The catch rates of the newest [`COUNTED`] canaries of `pools`, `listed` of them shown.
async fn catch_rates(web: &Web, pools: &[String], listed: u32) -> Result<CanaryReport, ApiError> {
    let canaries = web.store.canaries(pools, COUNTED).await?;
    Ok(report(&canaries, listed as usize))
}
