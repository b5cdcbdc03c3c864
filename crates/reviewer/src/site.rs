//! Where browsers reach the web UI, and what follows from it.
//!
//! Without a public URL the service takes the `Host` it is sent to at its word: the UI works
//! over plain HTTP on whatever address it listens on (the demo, a laptop). With one
//! (`--public-url`, the address behind a TLS-terminating proxy) that URL fixes the only
//! `Host` served (any other gets `421 Misdirected Request`) and the only `Origin` the UI's
//! posts may come from; when it is `https` the session cookie is `Secure` and named with the
//! `__Host-` prefix, so the browser sends it over TLS only, to this host only, for every path.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use axum::http::{HeaderValue, Uri};

use crate::auth::{self, LoginLimit, SESSION_COOKIE, SESSION_TTL};
use crate::desk::Claims;

/// The session cookie's name when the public URL is `https`.
pub const SECURE_SESSION_COOKIE: &str = "__Host-airlock_session";

/// The URL browsers reach the service at: `http` or `https`, a host and maybe a port, no path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    https: bool,
    /// Host and port as a browser sends them in `Host` (lowercase, no default port).
    authority: String,
}

/// Why a public URL is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("public URL '{url}': {why}")]
pub struct PublicUrlError {
    url: String,
    why: &'static str,
}

impl FromStr for PublicUrl {
    type Err = PublicUrlError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let error = |why| PublicUrlError { url: url.to_owned(), why };
        let uri: Uri = url.parse().map_err(|_| error("not a URL"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(error("the scheme must be http or https")),
        };
        let authority = uri.authority().ok_or_else(|| error("a host is needed"))?;
        if authority.as_str().contains('@') {
            return Err(error("user information is not allowed"));
        }
        if authority.host().is_empty() {
            return Err(error("a host is needed"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(error("the UI is served at the root: give no path or query"));
        }
        let host = authority.host().to_ascii_lowercase();
        let default_port = if https { 443 } else { 80 };
        let authority = match authority.port_u16() {
            Some(port) if port != default_port => format!("{host}:{port}"),
            _ => host,
        };
        Ok(PublicUrl { https, authority })
    }
}

impl fmt::Display for PublicUrl {
    /// The URL's origin, as browsers send it in `Origin`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", if self.https { "https" } else { "http" }, self.authority)
    }
}

impl PublicUrl {
    /// Where task `id` is shown in the UI.
    pub fn task(&self, id: &str) -> String {
        format!("{self}/#task-{id}")
    }

    /// Whether browsers reach the service over TLS.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// Whether a request's `Host` names this URL (an explicit default port included).
    pub fn is_host(&self, host: &str) -> bool {
        let default_port = if self.https { ":443" } else { ":80" };
        let host = host.strip_suffix(default_port).unwrap_or(host);
        host.eq_ignore_ascii_case(&self.authority)
    }

    /// Whether an `Origin` header names this URL's origin.
    pub fn is_origin(&self, origin: &str) -> bool {
        origin.eq_ignore_ascii_case(&self.to_string())
    }
}

// === impl Site ===

/// How the web UI treats browsers: where they reach it, how long their sessions last, how
/// often a client address may fail to sign in, how long the claims it takes last.
#[derive(Debug, Clone)]
pub struct Site {
    /// The URL browsers reach the service at, if it is fixed.
    pub public_url: Option<PublicUrl>,
    /// How long a browser session lasts.
    pub session_ttl: Duration,
    /// How failed sign-ins are limited.
    pub login_limit: LoginLimit,
    /// How long claims last, and whether opening a task claims it.
    pub claims: Claims,
}

impl Default for Site {
    fn default() -> Self {
        Site {
            public_url: None,
            session_ttl: SESSION_TTL,
            login_limit: LoginLimit::default(),
            claims: Claims::default(),
        }
    }
}

impl Site {
    /// The session cookie's name.
    pub fn session_cookie(&self) -> &'static str {
        if self.secure() { SECURE_SESSION_COOKIE } else { SESSION_COOKIE }
    }

    /// The `Set-Cookie` value that stores session `id` in the browser.
    pub fn set_session(&self, id: &str) -> HeaderValue {
        let max_age = self.session_ttl.as_millis().div_ceil(1000);
        self.cookie(&format!("{}={id}", self.session_cookie()), max_age)
    }

    /// The `Set-Cookie` value that removes the session cookie.
    pub fn clear_session(&self) -> HeaderValue {
        self.cookie(&format!("{}=", self.session_cookie()), 0)
    }

    /// Whether a request's `Host` may be served: any without a public URL, else the URL's.
    pub fn serves_host(&self, host: Option<&str>) -> bool {
        match &self.public_url {
            Some(url) => host.is_some_and(|host| url.is_host(host)),
            None => true,
        }
    }

    /// Whether an `Origin` header names the UI's origin: the public URL's, or without one the
    /// host the request was sent to (`Host`).
    pub fn same_origin(&self, origin: &str, host: &str) -> bool {
        match &self.public_url {
            Some(url) => url.is_origin(origin),
            None => auth::same_origin(origin, host),
        }
    }

    fn secure(&self) -> bool {
        self.public_url.as_ref().is_some_and(PublicUrl::is_https)
    }

    fn cookie(&self, pair: &str, max_age: u128) -> HeaderValue {
        let secure = if self.secure() { "; Secure" } else { "" };
        let cookie = format!("{pair}; Path=/{secure}; HttpOnly; SameSite=Strict; Max-Age={max_age}");
        HeaderValue::from_str(&cookie).expect("a cookie is ASCII")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(url: &str) -> Site {
        Site { public_url: Some(url.parse().unwrap()), ..Site::default() }
    }

    #[test]
    fn public_urls_are_origins() {
        let url: PublicUrl = "https://Review.Example.com/".parse().unwrap();
        assert_eq!(url.to_string(), "https://review.example.com");
        assert!(url.is_host("review.example.com") && url.is_host("review.example.com:443"));
        assert!(!url.is_host("review.example.com:8443") && !url.is_host("127.0.0.1:8080"));
        assert!(url.is_origin("https://review.example.com"));
        assert!(!url.is_origin("http://review.example.com") && !url.is_origin("https://review.example.com:8443"));
        let url: PublicUrl = "http://127.0.0.1:8080".parse().unwrap();
        assert_eq!((url.to_string().as_str(), url.is_https()), ("http://127.0.0.1:8080", false));
        for bad in ["review.example.com", "ftp://x", "https://a@x", "https://x/review", "https://x/?a=1", "https://"] {
            assert!(bad.parse::<PublicUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cookies_follow_the_scheme() {
        let secure = site("https://review.example.com");
        let cookie = secure.set_session("abc");
        assert_eq!(
            cookie.to_str().unwrap(),
            "__Host-airlock_session=abc; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=43200"
        );
        assert!(secure.clear_session().to_str().unwrap().starts_with("__Host-airlock_session=; Path=/; Secure;"));
        for plain in [Site::default(), site("http://review.internal")] {
            assert_eq!(plain.session_cookie(), SESSION_COOKIE);
            assert!(!plain.set_session("abc").to_str().unwrap().contains("Secure"));
        }
    }

    #[test]
    fn hosts_and_origins() {
        let open = Site::default();
        assert!(open.serves_host(Some("anything:1")) && open.serves_host(None));
        assert!(open.same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(!open.same_origin("https://127.0.0.1:8080", "127.0.0.1:8080"), "the scheme counts without one too");
        let fixed = site("https://review.example.com");
        assert!(fixed.serves_host(Some("review.example.com")));
        assert!(!fixed.serves_host(Some("127.0.0.1:8080")) && !fixed.serves_host(None));
        assert!(fixed.same_origin("https://review.example.com", "review.example.com"));
        assert!(!fixed.same_origin("http://review.example.com", "review.example.com"), "the scheme counts");
    }
}
