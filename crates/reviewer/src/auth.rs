//! Who may review: the tokens file, bearer tokens, browser sessions and CSRF protection.
//!
//! The tokens file is a YAML list of reviewers, each `{name, token_sha256, pools, admin?,
//! override?}` (an admin also sees the canaries' catch rates of its pools, and may throw
//! switches on runs; `override` names the pools, or `"*"`, where the reviewer may decide or
//! release a task another reviewer claimed).
//! Only the SHA-256 of a token is stored; `airlock reviewer add-token` makes a random token, appends
//! its hash and prints the token once. A reviewer sees and decides the tasks of its pools
//! (`"*"` stands for every pool the service serves), and its name is recorded as the answer's
//! `decided_by`.
//!
//! The API takes `Authorization: Bearer <token>`. The web UI trades a token for a session
//! cookie (`HttpOnly`, `SameSite=Strict`); every state-changing UI request must also carry the
//! session's CSRF token (a form field or the `X-CSRF-Token` header) and, when the browser sends
//! one, an `Origin` naming this very host (see [`crate::site`]). Sessions live in the store,
//! so they outlast a restart and hold across processes sharing it. A session ends at logout,
//! at expiry, or when its reviewer's token is replaced in the tokens file (a session keeps the
//! hash of the token it was opened with), and whatever follows it (the event stream) ends with
//! it. A client address that fails to sign in [`LOGIN_FAILURES`] times within [`LOGIN_WINDOW`]
//! waits for the window's end; failures are counted per process.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use airlock_records::time::now_ms;
use airlock_tokens::{Tokens, TokensError};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::{Store, StoreError, StoredSession};

pub use airlock_tokens::{check_name, constant_time_eq, new_token, random_hex, sha256_hex};

/// The pool pattern that stands for every pool the service serves.
pub const ALL_POOLS: &str = "*";
/// The session cookie's name.
pub const SESSION_COOKIE: &str = "airlock_session";
/// The header a script sends the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a browser session lasts, unless the service is told otherwise.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// One reviewer of the tokens file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reviewer {
    /// The name recorded as `decided_by` of this reviewer's answers.
    pub name: String,
    /// The SHA-256 of the reviewer's token, lowercase hex.
    pub token_sha256: String,
    /// The pools whose tasks the reviewer sees and decides (`"*"`: all of the service's).
    pub pools: Vec<String>,
    /// Whether the reviewer is an admin, who also sees the canaries' catch rates of those pools
    /// (`GET /api/canaries`, the Canaries page) and may see the runs under control and throw
    /// switches on them (`/api/runs`, the Runs page). Not unless the file says `admin: true`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub admin: bool,
    /// The pools (`"*"`: all of the reviewer's) where the reviewer holds the override: may
    /// decide, and release, a task another reviewer claimed. None unless the file says
    /// `override: [..]`.
    #[serde(default, rename = "override", skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Reviewer {
    /// Whether the reviewer may see and decide tasks of `pool`.
    pub fn sees(&self, pool: &str) -> bool {
        self.pools.iter().any(|p| p == pool || p == ALL_POOLS)
    }

    /// Whether the reviewer holds the override of `pool`: may decide and release a task of it
    /// that another reviewer claimed.
    pub fn overrides(&self, pool: &str) -> bool {
        self.sees(pool) && self.overrides.iter().any(|p| p == pool || p == ALL_POOLS)
    }

    /// The reviewer's pools among `served` (the service's pools).
    pub fn pools_among(&self, served: &[String]) -> Vec<String> {
        served.iter().filter(|pool| self.sees(pool)).cloned().collect()
    }

    /// Whether `token_sha256` (a session's) is the hash of the reviewer's token now: after the
    /// token is replaced in the tokens file, the sessions opened with the old one are refused.
    pub fn holds_token(&self, token_sha256: &str) -> bool {
        constant_time_eq(self.token_sha256.to_ascii_lowercase().as_bytes(), token_sha256.as_bytes())
    }
}

impl airlock_tokens::Entry for Reviewer {
    const KIND: &'static str = "reviewer";

    fn name(&self) -> &str {
        &self.name
    }

    fn token_sha256(&self) -> &str {
        &self.token_sha256
    }

    fn check(&self) -> Result<(), String> {
        if self.pools.is_empty() {
            return Err("pools must name at least one pool".into());
        }
        Ok(())
    }
}

/// What is wrong with a tokens file or a new reviewer.
pub type AuthError = TokensError;

/// Every reviewer the service knows.
pub type Reviewers = Tokens<Reviewer>;

/// Appends a reviewer (an admin if `admin`, holding the override of the pools `overrides`
/// names) with a new random token to the tokens file (created if missing) and returns the
/// token, which is stored nowhere else.
pub fn add_token(
    path: &Path,
    name: &str,
    pools: &[String],
    admin: bool,
    overrides: &[String],
) -> Result<String, AuthError> {
    let invalid = |message: &str| TokensError::Invalid { path: path.display().to_string(), message: message.into() };
    let pools = airlock_tokens::quoted_list(pools)
        .filter(|_| !pools.is_empty())
        .ok_or_else(|| invalid("--pools must name at least one pool"))?;
    let mut fields = vec![("pools", pools)];
    if admin {
        fields.push(("admin", "true".to_owned()));
    }
    if !overrides.is_empty() {
        let overrides =
            airlock_tokens::quoted_list(overrides).ok_or_else(|| invalid("--override: a pool name is not usable"))?;
        fields.push(("override", overrides));
    }
    airlock_tokens::add_token::<Reviewer>(path, name, &fields)
}

// === impl Sessions ===

/// A logged-in browser, as [`Sessions`] keeps it.
#[derive(Debug, Clone)]
pub struct SessionEntry {
    /// The reviewer's name.
    pub reviewer: String,
    /// The SHA-256 of the token the session was opened with.
    pub token_sha256: String,
    /// The token forms and scripts must echo.
    pub csrf: String,
    /// When the session ends.
    pub end: SessionEnd,
}

/// The end of a session: its logout or its expiry, whichever comes first.
#[derive(Debug, Clone)]
pub struct SessionEnd {
    closed: CancellationToken,
    expires: Instant,
}

impl SessionEnd {
    /// Whether the session has ended.
    pub fn is_over(&self) -> bool {
        self.closed.is_cancelled() || Instant::now() >= self.expires
    }

    /// Resolves when the session ends.
    pub async fn wait(&self) {
        tokio::select! {
            () = self.closed.cancelled() => {}
            () = tokio::time::sleep_until(self.expires) => {}
        }
    }
}

/// How often a session's event stream asks the store whether its session is still live, so
/// that a logout on another process sharing the store ends it within this long.
pub const SESSION_RECHECK: Duration = Duration::from_secs(2);

/// Browser sessions, kept in the store (by the SHA-256 of their ids), so a restart keeps them
/// and every process sharing the store accepts them without sticky routing. Each lookup asks
/// the store (one primary-key read), so a logout anywhere is seen at the next request; a
/// logout here also ends this process's event streams of the session at once.
#[derive(Debug)]
pub struct Sessions {
    store: Store,
    ttl: Duration,
    /// The ends of the live sessions this process has served, by id hash.
    local: Mutex<HashMap<String, SessionEnd>>,
}

impl Sessions {
    /// Sessions kept in `store`; each new one lasts `ttl`.
    pub fn new(store: Store, ttl: Duration) -> Self {
        Sessions { store, ttl, local: Mutex::default() }
    }

    /// Opens a session for `reviewer`, bound to the reviewer's token of now; returns its id
    /// (the cookie's value). Forgets the sessions that expired meanwhile.
    pub async fn open(&self, reviewer: &Reviewer) -> Result<String, StoreError> {
        let id = random_hex::<32>();
        let now = now_ms();
        self.store.prune_sessions(now).await?;
        self.local.lock().expect("sessions lock").retain(|_, end| !end.is_over());
        let session = StoredSession {
            id_sha256: sha256_hex(&id),
            reviewer: reviewer.name.clone(),
            token_sha256: reviewer.token_sha256.to_ascii_lowercase(),
            csrf: random_hex::<32>(),
            created_at: now,
            expires_at: now.saturating_add(i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)),
        };
        self.store.open_session(&session).await?;
        Ok(id)
    }

    /// The live session with this id: neither logged out (by any process) nor expired.
    pub async fn get(&self, id: &str) -> Result<Option<SessionEntry>, StoreError> {
        let hash = sha256_hex(id);
        let now = now_ms();
        let Some(stored) = self.store.session(&hash, now).await? else {
            if let Some(end) = self.local.lock().expect("sessions lock").remove(&hash) {
                end.closed.cancel();
            }
            return Ok(None);
        };
        let left = Duration::from_millis(u64::try_from(stored.expires_at - now).unwrap_or_default());
        let end = self
            .local
            .lock()
            .expect("sessions lock")
            .entry(hash)
            .or_insert_with(|| SessionEnd { closed: CancellationToken::new(), expires: Instant::now() + left })
            .clone();
        Ok(Some(SessionEntry { reviewer: stored.reviewer, token_sha256: stored.token_sha256, csrf: stored.csrf, end }))
    }

    /// Ends a session for every process sharing the store; whatever waits for its end here (an
    /// event stream) stops at once, elsewhere within [`SESSION_RECHECK`].
    pub async fn close(&self, id: &str) -> Result<(), StoreError> {
        let hash = sha256_hex(id);
        self.store.log_out(&hash, now_ms()).await?;
        if let Some(end) = self.local.lock().expect("sessions lock").remove(&hash) {
            end.closed.cancel();
        }
        Ok(())
    }
}

// === impl LoginLimiter ===

/// How many sign-ins a client address may fail within a window before it has to wait for the
/// window's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginLimit {
    /// Failures allowed per window.
    pub failures: u32,
    /// The window, counted from an address's first failure in it.
    pub window: Duration,
}

/// Failed sign-ins an address may make per [`LOGIN_WINDOW`].
pub const LOGIN_FAILURES: u32 = 5;
/// The window of [`LOGIN_FAILURES`].
pub const LOGIN_WINDOW: Duration = Duration::from_secs(60);
/// Addresses whose failures are remembered at most; past it, the oldest window is forgotten.
pub const LOGIN_TRACKED: usize = 10_000;

impl Default for LoginLimit {
    fn default() -> Self {
        LoginLimit { failures: LOGIN_FAILURES, window: LOGIN_WINDOW }
    }
}

/// The failed sign-ins of one client address in its current window.
#[derive(Debug, Clone, Copy)]
struct Failures {
    since: Instant,
    count: u32,
}

/// Failed sign-ins per client address, in memory and bounded by [`LOGIN_TRACKED`]. A client is
/// an IPv4 address or an IPv6 /64 (what one host usually holds).
#[derive(Debug, Default)]
pub struct LoginLimiter {
    limit: LoginLimit,
    map: Mutex<HashMap<IpAddr, Failures>>,
}

impl LoginLimiter {
    /// No failures yet, limited by `limit`.
    pub fn new(limit: LoginLimit) -> Self {
        LoginLimiter { limit, map: Mutex::default() }
    }

    /// Whether `addr` may try to sign in at `now`; if not, how long until it may.
    pub fn check(&self, addr: IpAddr, now: Instant) -> Result<(), Duration> {
        let map = self.map.lock().expect("logins lock");
        match map.get(&client(addr)) {
            Some(f) if f.count >= self.limit.failures && now < f.since + self.limit.window => {
                Err(f.since + self.limit.window - now)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed sign-in of `addr` at `now`.
    pub fn failed(&self, addr: IpAddr, now: Instant) {
        let window = self.limit.window;
        let mut map = self.map.lock().expect("logins lock");
        if map.len() >= LOGIN_TRACKED {
            map.retain(|_, f| now < f.since + window);
            if map.len() >= LOGIN_TRACKED
                && let Some(oldest) = map.iter().min_by_key(|(_, f)| f.since).map(|(addr, _)| *addr)
            {
                map.remove(&oldest);
            }
        }
        let failures = map.entry(client(addr)).or_insert(Failures { since: now, count: 0 });
        if now >= failures.since + window {
            *failures = Failures { since: now, count: 0 };
        }
        failures.count += 1;
    }

    /// Forgets the failures of `addr`, which just signed in.
    pub fn succeeded(&self, addr: IpAddr) {
        self.map.lock().expect("logins lock").remove(&client(addr));
    }
}

/// The client an address stands for: an IPv4 address (also mapped into IPv6), or an IPv6 /64.
fn client(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
}

/// Whether an `Origin` header names the host the request was sent to (`Host`) over plain
/// HTTP, the only scheme the service speaks itself: a page at `https://` the same host is
/// another origin (behind a TLS proxy, the public URL names the origin).
pub fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else { return false };
    scheme.eq_ignore_ascii_case("http") && rest.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests;
