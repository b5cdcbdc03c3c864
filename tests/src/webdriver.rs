//! Just enough of the W3C WebDriver protocol to drive headless Chromium through
//! `chromedriver`: sessions, navigation, elements, clicks, typing, scripts, screenshots and an
//! accessibility audit with axe-core.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use airlock_reviewer::client::request;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// Debian's Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's chromedriver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// axe-core's script, from npm (`.ci/run` installs it under `.node/`).
pub const AXE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../.node/node_modules/axe-core/axe.min.js");
/// How long one wait for an element may take before the test fails saying what it waited
/// for. Only a hang guard, shorter than the scenario's ([`in_browser`]).
const WAIT_GUARD: Duration = Duration::from_secs(60);
/// The key WebDriver names element references with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Whether the browser tests can run: with `CI` set, missing packages fail the test;
/// elsewhere the reason is printed and the test skips.
pub fn browser_available() -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER, AXE].into_iter().filter(|p| !Path::new(p).exists()).collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and {missing:?} is missing: run .ci/run (Debian chromium, chromium-driver; npm axe-core)");
    }
    eprintln!("skipping: {missing:?} missing (.ci/run installs Debian chromium, chromium-driver and npm axe-core)");
    false
}

/// Runs a browser scenario under twice the hang guard (each of its waits has its own), or skips
/// it (as [`browser_available`] says) when the browser is missing. The scenario is made here,
/// straight onto the heap: a whole scenario's future is large, and a test thread's stack does
/// not hold it moved about by value.
pub async fn in_browser<F: Future<Output = ()>>(scenario: impl FnOnce() -> F) {
    if !browser_available() {
        return;
    }
    let scenario = Box::pin(scenario());
    tokio::time::timeout(2 * crate::HANG_GUARD, scenario).await.expect("the browser test hung");
}

/// A chromedriver process and one headless Chromium session, both ended on [`Browser::quit`]
/// (and the driver killed when dropped).
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver on a free port and a fresh headless Chromium.
    pub async fn start() -> Browser {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").port()
        };
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        loop {
            if let Ok(response) = request("GET", &format!("{base}/status"), &[], None).await
                && response.json()["value"]["ready"] == true
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = std::env::temp_dir().join(format!("airlock-chromium-{}", airlock_testkit::unique_prefix()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--window-size=1024,768", format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let mut browser = Browser { driver, base, session: String::new(), profile };
        let created = browser.call("POST", "/session", Some(capabilities)).await;
        browser.session = created["sessionId"].as_str().expect("a WebDriver session").to_owned();
        browser
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = if self.session.is_empty() || path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let body = body.map(|b| b.to_string());
        let headers = [("Content-Type", "application/json")];
        let response =
            request(method, &url, &headers, body.as_deref().map(str::as_bytes)).await.expect("chromedriver answers");
        let value = response.json()["value"].clone();
        assert!(response.status < 400, "WebDriver {method} {path}: {} {value}", response.status);
        value
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url}))).await;
    }

    /// Signs in on the reviewer UI at `url` with `token`, and waits for the live pending page.
    pub async fn sign_in(&self, url: &str, token: &str) {
        self.goto(url).await;
        self.type_into(&self.wait_for("input#token").await, token).await;
        self.click(&self.wait_for("section.login button").await).await;
        self.wait_for("#live.on").await;
    }

    /// The elements matching a CSS selector (none is not an error).
    pub async fn find_all(&self, css: &str) -> Vec<String> {
        let found = self.call("POST", "/elements", Some(json!({"using": "css selector", "value": css}))).await;
        found.as_array().into_iter().flatten().filter_map(|e| e[ELEMENT].as_str().map(str::to_owned)).collect()
    }

    /// Waits until an element matches `css`, and returns the first; past [`WAIT_GUARD`] the
    /// test fails naming the selector and the page as it stands.
    pub async fn wait_for(&self, css: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT_GUARD;
        loop {
            if let Some(first) = self.find_all(css).await.into_iter().next() {
                return first;
            }
            self.hung_past(deadline, &format!("`{css}` never appeared")).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until nothing matches `css`, as [`Browser::wait_for`] waits.
    pub async fn wait_gone(&self, css: &str) {
        let deadline = tokio::time::Instant::now() + WAIT_GUARD;
        while !self.find_all(css).await.is_empty() {
            self.hung_past(deadline, &format!("`{css}` never left")).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Awaits `answer` (what the page's action brought about, such as the runner's decision)
    /// as [`Browser::wait_for`] waits, failing with the page as it stands.
    pub async fn answer<T>(&self, answer: impl Future<Output = T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT_GUARD;
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(answer) => answer,
            Err(_) => {
                self.hung_past(deadline, "no answer came").await;
                unreachable!("past its deadline");
            }
        }
    }

    /// Fails the test once `deadline` has passed: what it waited for, the page's address and
    /// its text, so that a hang says where it was.
    async fn hung_past(&self, deadline: tokio::time::Instant, what: &str) {
        if tokio::time::Instant::now() < deadline {
            return;
        }
        let url = self.call("GET", "/url", None).await;
        let text = self.execute("return document.body ? document.body.innerText : ''").await;
        panic!("{what} within {WAIT_GUARD:?} on {url}; the page reads:\n{}", text.as_str().unwrap_or_default());
    }

    /// Clicks an element.
    pub async fn click(&self, element: &str) {
        self.call("POST", &format!("/element/{element}/click"), Some(json!({}))).await;
    }

    /// Types into an element.
    pub async fn type_into(&self, element: &str, text: &str) {
        self.call("POST", &format!("/element/{element}/value"), Some(json!({"text": text}))).await;
    }

    /// An element's rendered text.
    pub async fn text(&self, element: &str) -> String {
        self.call("GET", &format!("/element/{element}/text"), None).await.as_str().unwrap_or_default().to_owned()
    }

    /// Runs a script in the page and returns its result.
    pub async fn execute(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", Some(json!({"script": script, "args": []}))).await
    }

    /// Runs an asynchronous script (it calls `arguments[arguments.length - 1]` with its
    /// result) and returns what it passed.
    pub async fn execute_async(&self, script: &str) -> Value {
        self.call("POST", "/execute/async", Some(json!({"script": script, "args": []}))).await
    }

    /// axe-core's audit of the page as it is: every violation is printed, and none may be
    /// serious or critical.
    pub async fn assert_accessible(&self, page: &str) {
        let violations = self.audit().await;
        for v in &violations {
            eprintln!(
                "axe on {page}: {} ({}): {} at {:?}",
                v.rule,
                v.impact.as_deref().unwrap_or("?"),
                v.help,
                v.nodes
            );
        }
        let grave: Vec<&str> = violations.iter().filter(|v| v.grave()).map(|v| v.rule.as_str()).collect();
        assert!(grave.is_empty(), "serious or critical accessibility violations on {page}: {grave:?}");
    }

    /// Runs axe-core's audit on the page as it is now and returns its violations, each with
    /// its rule, impact, help text and the elements it found.
    pub async fn audit(&self) -> Vec<Violation> {
        let axe = std::fs::read_to_string(AXE).expect("axe-core's script is readable");
        // Injected by the driver, not by a <script> element, so the page's CSP holds.
        let script = format!(
            "var done = arguments[arguments.length - 1];\n{axe}\n\
             axe.run(document, {{resultTypes: ['violations']}}).then(function (r) {{\
               done(r.violations.map(function (v) {{ return {{rule: v.id, impact: v.impact, help: v.help,\
                 nodes: v.nodes.map(function (n) {{ return n.target.join(' '); }})}}; }}));\
             }}, function (e) {{ done('axe failed: ' + e); }});"
        );
        let found = self.execute_async(&script).await;
        let violations = found.as_array().unwrap_or_else(|| panic!("axe's answer: {found}"));
        violations
            .iter()
            .map(|v| Violation {
                rule: v["rule"].as_str().unwrap_or_default().to_owned(),
                impact: v["impact"].as_str().map(str::to_owned),
                help: v["help"].as_str().unwrap_or_default().to_owned(),
                nodes: v["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
            })
            .collect()
    }

    /// The element that has the focus, as its tag and classes (`button.btn.approve`).
    pub async fn focused(&self) -> String {
        let described = self
            .execute(
                "var e = document.activeElement; \
                 return e.tagName.toLowerCase() + (e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '');",
            )
            .await;
        described.as_str().unwrap_or_default().to_owned()
    }

    /// Sends keys to the page (the focused element, or the body).
    pub async fn press(&self, key: &str) {
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]});
        self.call("POST", "/actions", Some(actions)).await;
    }

    /// Saves a PNG screenshot of the page to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let encoded = self.call("GET", "/screenshot", None).await;
        let png = base64_decode(encoded.as_str().unwrap_or_default());
        std::fs::write(path, png).expect("the screenshot is written");
    }

    /// Ends the session and the driver, and removes the profile.
    pub async fn quit(mut self) {
        let _ = request("DELETE", &format!("{}/session/{}", self.base, self.session), &[], None).await;
        let _ = self.driver.kill().await;
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Where screenshots go: the directory `AIRLOCK_SCREENSHOTS` names (an absolute path; README's
/// images come from `AIRLOCK_SCREENSHOTS=$PWD/docs/images`), else the temporary directory.
pub fn screenshot_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("AIRLOCK_SCREENSHOTS").map_or_else(std::env::temp_dir, PathBuf::from);
    dir.join(name)
}

/// One rule axe-core found broken on a page.
#[derive(Debug)]
pub struct Violation {
    /// The rule's id (`color-contrast`, `label`, …).
    pub rule: String,
    /// `minor`, `moderate`, `serious` or `critical`.
    pub impact: Option<String>,
    /// What the rule asks for.
    pub help: String,
    /// The elements that break it, as CSS selectors.
    pub nodes: Vec<String>,
}

impl Violation {
    /// Whether it is `serious` or `critical`.
    pub fn grave(&self) -> bool {
        matches!(self.impact.as_deref(), Some("serious" | "critical"))
    }
}

/// Standard base64 (with padding), as WebDriver sends screenshots.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0);
    for sextet in text.bytes().filter_map(value) {
        buffer = (buffer << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    out
}
