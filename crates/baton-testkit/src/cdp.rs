//! A small Chrome DevTools Protocol client for end-to-end tests: it launches headless Chromium
//! with a fresh profile, attaches to its page over a WebSocket (sync `tungstenite`, no TLS) and
//! offers what a test needs: navigate, evaluate, click, type, wait for a condition, screenshot.
//!
//! Every wait is bounded; the browser is closed (then killed) when the [`Browser`] is dropped.
//! Console messages, uncaught exceptions and browser log entries (CSP violations among them)
//! are kept so a failing test can print what the page said.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fs;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// How long a single CDP command may take before it is an error.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a wait lets a replaced page take to get its new JavaScript context before it
/// evaluates anyway (the evaluation then says why it cannot run, and the wait goes on).
const CONTEXT_GRACE: Duration = Duration::from_secs(5);
/// How long Chromium may take to write `DevToolsActivePort`.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);
/// How often [`Browser::wait_for`] re-evaluates its condition.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The most page messages kept (the oldest are dropped past it).
const MAX_LOG: usize = 500;
/// The window size, so screenshots are the same size everywhere.
pub const WINDOW: (u32, u32) = (1280, 900);

/// What went wrong talking to the browser.
#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    #[error("CDP_LAUNCH: could not start {path}: {source}")]
    Launch {
        path: String,
        source: std::io::Error,
    },
    #[error("CDP_NO_PORT: Chromium wrote no DevTools port within {0:?}; its output:\n{1}")]
    NoPort(Duration, String),
    #[error("CDP_CONNECT: {0}")]
    Connect(String),
    #[error("CDP_IO: {0}")]
    Io(#[from] std::io::Error),
    #[error("CDP_SOCKET: {0}")]
    Socket(#[from] tungstenite::Error),
    #[error("CDP_TIMEOUT: no answer to {method} within {timeout:?}")]
    Timeout { method: String, timeout: Duration },
    #[error("CDP_COMMAND: {method} failed: {error}")]
    Command { method: String, error: Value },
    #[error("CDP_EXCEPTION: the page threw evaluating `{expression}`: {details}")]
    Exception { expression: String, details: String },
    #[error(
        "CDP_WAIT: `{condition}` not true within {timeout:?} (last value: {last}); page log:\n{log}"
    )]
    Wait {
        condition: String,
        timeout: Duration,
        last: String,
        log: String,
    },
    #[error("CDP_BAD_REPLY: {0}")]
    BadReply(String),
}

/// The Chromium binary to use: `BATON_CHROMIUM`, else `chromium`, `chromium-browser` or
/// `google-chrome` found on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("BATON_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| {
            ["chromium", "chromium-browser", "google-chrome"].map(|name| dir.join(name))
        })
        .find(|candidate| candidate.is_file())
}

/// Whether a missing browser must fail the test (CI sets `BATON_REQUIRE_BROWSER=1`).
pub fn browser_required() -> bool {
    std::env::var("BATON_REQUIRE_BROWSER").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The Chromium binary, or `None` after saying why the test skips. Panics when there is no
/// browser but `BATON_REQUIRE_BROWSER` is set, so CI can never skip silently.
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    match find_chromium() {
        Some(path) => Some(path),
        None if browser_required() => panic!(
            "{test}: BATON_REQUIRE_BROWSER is set but no Chromium was found \
             (install the `chromium` package or set BATON_CHROMIUM)"
        ),
        None => {
            eprintln!(
                "{test}: skipped: no Chromium found (install `chromium` or set BATON_CHROMIUM; \
                 set BATON_REQUIRE_BROWSER=1 to make this a failure)"
            );
            None
        }
    }
}

/// One headless Chromium with one page attached.
pub struct Browser {
    child: Child,
    profile: tempfile::TempDir,
    socket: WebSocket<TcpStream>,
    next_id: u64,
    /// The page's main frame (its id stays the same across navigations).
    main_frame: String,
    /// The main frame's JavaScript context, `None` from its document's end until the next
    /// document's context exists.
    context: Option<u64>,
    /// How many times the main frame's document was replaced (or its contexts dropped): an
    /// evaluation that sees it change will never be answered by its page.
    replaced: u64,
    /// Events read while waiting for a command's answer, not yet looked at.
    events: VecDeque<Value>,
    log: VecDeque<String>,
}

impl Browser {
    /// Launches `chromium` headless with a fresh profile and attaches to its first page.
    pub fn launch(chromium: &Path) -> Result<Browser, CdpError> {
        Browser::launch_with(chromium, &[])
    }

    /// [`Browser::launch`] with more command-line switches, e.g.
    /// `--host-resolver-rules=MAP rebound.test 127.0.0.1` to point a name at loopback.
    pub fn launch_with(chromium: &Path, extra: &[&str]) -> Result<Browser, CdpError> {
        let profile = tempfile::Builder::new()
            .prefix("baton-chromium-")
            .tempdir()?;
        let output = fs::File::create(profile.path().join("chromium.log"))?;
        let (width, height) = WINDOW;
        let mut command = Command::new(chromium);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                // Without these Chromium tries to reach Google's servers at start-up.
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                // A page left stays alive in the back-forward cache otherwise; tests want the
                // one page they look at.
                "--disable-features=BackForwardCache",
                "--hide-scrollbars",
                "--mute-audio",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                &format!("--window-size={width},{height}"),
            ])
            .args(extra)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            // Its own process group, so the renderers can be ended with it.
            .process_group(0);
        let child = command.spawn().map_err(|source| CdpError::Launch {
            path: chromium.display().to_string(),
            source,
        })?;
        let mut guard = ChildGuard(Some(child));
        let port = wait_for_port(profile.path(), &mut guard)?;
        let page = page_socket_path(port)?;
        let socket = connect(port, &page)?;
        let child = guard
            .0
            .take()
            .ok_or_else(|| CdpError::Connect("lost the child".into()))?;
        let mut browser = Browser {
            child,
            profile,
            socket,
            next_id: 0,
            main_frame: String::new(),
            context: None,
            replaced: 0,
            events: VecDeque::new(),
            log: VecDeque::new(),
        };
        browser.call("Page.enable", json!({}))?;
        browser.call("Page.setLifecycleEventsEnabled", json!({ "enabled": true }))?;
        let tree = browser.call("Page.getFrameTree", json!({}))?;
        browser.main_frame = tree
            .pointer("/frameTree/frame/id")
            .and_then(Value::as_str)
            .ok_or_else(|| CdpError::BadReply(format!("getFrameTree gave no frame: {tree}")))?
            .to_string();
        // After the main frame is known: enabling Runtime reports the contexts that exist.
        browser.call("Runtime.enable", json!({}))?;
        browser.call("Log.enable", json!({}))?;
        Ok(browser)
    }

    /// The browser's process id (also its process group's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command and returns its `result`, keeping the events read meanwhile.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, CdpError> {
        self.call_until(method, params, Instant::now() + COMMAND_TIMEOUT)
    }

    /// [`Browser::call`] with its own deadline; a reply arriving later is dropped when read.
    fn call_until(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, CdpError> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({ "id": id, "method": method, "params": params });
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(CdpError::from)?;
        let started = Instant::now();
        loop {
            let Some(reply) = self.read_until(deadline)? else {
                return Err(CdpError::Timeout {
                    method: method.to_string(),
                    timeout: deadline.saturating_duration_since(started),
                });
            };
            if reply.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = reply.get("error") {
                    return Err(CdpError::Command {
                        method: method.to_string(),
                        error: error.clone(),
                    });
                }
                return Ok(reply.get("result").cloned().unwrap_or(Value::Null));
            }
            if reply.get("method").is_some() {
                self.keep_event(reply);
            }
        }
    }

    /// Opens `url` and waits (bounded) until that navigation's document has loaded: the `load`
    /// lifecycle event of the loader `Page.navigate` started, so a load event of an earlier
    /// document can never be taken for it.
    pub fn navigate(&mut self, url: &str) -> Result<(), CdpError> {
        self.events.clear();
        let result = self.call("Page.navigate", json!({ "url": url }))?;
        if let Some(error) = result.get("errorText").and_then(Value::as_str) {
            return Err(CdpError::Command {
                method: "Page.navigate".into(),
                error: json!(error),
            });
        }
        // A navigation within the same document (a fragment) has no loader and no load.
        let Some(loader) = result.get("loaderId").and_then(Value::as_str) else {
            return Ok(());
        };
        let loader = loader.to_string();
        let frame = self.main_frame.clone();
        self.wait_event_where(
            &format!("Page.lifecycleEvent load of {url}"),
            COMMAND_TIMEOUT,
            |event| {
                event.get("method").and_then(Value::as_str) == Some("Page.lifecycleEvent")
                    && event.pointer("/params/name").and_then(Value::as_str) == Some("load")
                    && event.pointer("/params/loaderId").and_then(Value::as_str)
                        == Some(loader.as_str())
                    && event.pointer("/params/frameId").and_then(Value::as_str)
                        == Some(frame.as_str())
            },
        )?;
        // What came before that load belongs to the pages before it.
        self.events.clear();
        Ok(())
    }

    /// Waits for the next event named `method` (one already read counts).
    pub fn wait_event(&mut self, method: &str, timeout: Duration) -> Result<Value, CdpError> {
        self.wait_event_where(method, timeout, |event| {
            event.get("method").and_then(Value::as_str) == Some(method)
        })
    }

    /// Waits for the next event `wanted` accepts (one already read counts) and returns its
    /// `params`; `what` names it in the timeout error.
    fn wait_event_where(
        &mut self,
        what: &str,
        timeout: Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> Result<Value, CdpError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.events.iter().position(&wanted) {
                // Drop what came before it: those events are older than the one awaited.
                let event = self.events.drain(..=at).next_back().unwrap_or(Value::Null);
                return Ok(event.get("params").cloned().unwrap_or(Value::Null));
            }
            match self.read_until(deadline)? {
                Some(message) if message.get("method").is_some() => self.keep_event(message),
                Some(_) => {}
                None => {
                    return Err(CdpError::Timeout {
                        method: what.to_string(),
                        timeout,
                    });
                }
            }
        }
    }

    /// Evaluates `expression` in the page (promises awaited) and returns its value as JSON.
    pub fn eval(&mut self, expression: &str) -> Result<Value, CdpError> {
        let result = self.call("Runtime.evaluate", evaluate_params(expression))?;
        evaluation_value(expression, &result)
    }

    /// Re-evaluates `condition` until it is truthy and returns that value; after `timeout`
    /// the error carries the last value and the page's log. An exception counts as "not yet"
    /// (the element may not exist yet), and so does a page replaced under an evaluation: the
    /// wait goes on in the next page once its JavaScript context exists (CDP events, no
    /// guessed delay), so a click that navigates, a reload or a form post never ends a wait.
    pub fn wait_for(&mut self, condition: &str, timeout: Duration) -> Result<Value, CdpError> {
        let deadline = Instant::now() + timeout;
        // What the page last answered: an evaluation cut by the deadline does not hide it.
        let mut last = String::from("no answer within the wait");
        loop {
            self.await_context(deadline.min(Instant::now() + CONTEXT_GRACE))?;
            match self.eval_unless_replaced(condition, deadline) {
                Ok(Some(value)) if truthy(&value) => return Ok(value),
                Ok(Some(value)) => last = value.to_string(),
                Ok(None) => last = "no answer (the page was replaced under the evaluation)".into(),
                Err(CdpError::Exception { details, .. }) => last = details,
                Err(CdpError::Timeout { .. }) => {}
                // A page being replaced by the next one has no context to evaluate in for a
                // moment.
                Err(CdpError::Command { error, .. }) if navigating(&error) => {
                    last = error.to_string();
                }
                Err(other) => return Err(other),
            }
            if Instant::now() >= deadline {
                return Err(CdpError::Wait {
                    condition: condition.to_string(),
                    timeout,
                    last,
                    log: self.log_text(),
                });
            }
            // Between two evaluations, take in what the page says (and let it get on).
            let pause = Instant::now() + POLL_INTERVAL;
            while Instant::now() < pause {
                match self.read_until(pause)? {
                    Some(message) if message.get("method").is_some() => self.keep_event(message),
                    Some(_) => {}
                    None => break,
                }
            }
        }
    }

    /// Reads events until the main frame has a JavaScript context or `until` passes.
    fn await_context(&mut self, until: Instant) -> Result<(), CdpError> {
        while self.context.is_none() {
            match self.read_until(until)? {
                Some(message) if message.get("method").is_some() => self.keep_event(message),
                Some(_) => {}
                None => break,
            }
        }
        Ok(())
    }

    /// One evaluation, bounded by `deadline`, given up (`Ok(None)`) as soon as the page it ran
    /// in is replaced: Chromium never answers a promise whose page went away. A late answer
    /// is dropped when read (its id is no longer awaited).
    fn eval_unless_replaced(
        &mut self,
        expression: &str,
        deadline: Instant,
    ) -> Result<Option<Value>, CdpError> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({
            "id": id,
            "method": "Runtime.evaluate",
            "params": evaluate_params(expression),
        });
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(CdpError::from)?;
        let replaced = self.replaced;
        let started = Instant::now();
        loop {
            let Some(reply) = self.read_until(deadline)? else {
                return Err(CdpError::Timeout {
                    method: "Runtime.evaluate".into(),
                    timeout: deadline.saturating_duration_since(started),
                });
            };
            if reply.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = reply.get("error") {
                    return Err(CdpError::Command {
                        method: "Runtime.evaluate".into(),
                        error: error.clone(),
                    });
                }
                let result = reply.get("result").cloned().unwrap_or(Value::Null);
                return evaluation_value(expression, &result).map(Some);
            }
            if reply.get("method").is_some() {
                self.keep_event(reply);
                if self.replaced != replaced {
                    return Ok(None);
                }
            }
        }
    }

    /// Clicks the centre of the element `selector` finds, with real mouse events (so the
    /// page sees what a person's click does: focus, mousedown, mouseup, click, submit).
    pub fn click(&mut self, selector: &str) -> Result<(), CdpError> {
        let (x, y) = self.centre_of(selector)?;
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            )?;
        }
        Ok(())
    }

    /// Focuses the element `selector` finds, clears it, and types `text` as a person would
    /// (input events fire).
    pub fn type_into(&mut self, selector: &str, text: &str) -> Result<(), CdpError> {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return false; \
             e.focus(); if ('value' in e) {{ e.value = ''; }} return true; }})()",
            sel = js_string(selector)
        ))?;
        if found != Value::Bool(true) {
            return Err(CdpError::BadReply(format!("no element matches {selector}")));
        }
        self.call("Input.insertText", json!({ "text": text }))?;
        Ok(())
    }

    /// A PNG of the page's viewport.
    pub fn screenshot(&mut self) -> Result<Vec<u8>, CdpError> {
        let result = self.call("Page.captureScreenshot", json!({ "format": "png" }))?;
        let data = result
            .get("data")
            .and_then(Value::as_str)
            .ok_or_else(|| CdpError::BadReply("captureScreenshot gave no data".into()))?;
        data_encoding::BASE64
            .decode(data.as_bytes())
            .map_err(|e| CdpError::BadReply(format!("screenshot is not base64: {e}")))
    }

    /// Writes a PNG of the page to `path` (creating its directory).
    pub fn save_screenshot(&mut self, path: &Path) -> Result<(), CdpError> {
        let png = self.screenshot()?;
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        fs::write(path, png)?;
        Ok(())
    }

    /// Console messages, uncaught exceptions and browser log entries seen so far, one per line.
    pub fn log_text(&mut self) -> String {
        // Take in whatever arrived since the last command.
        while let Ok(Some(message)) = self.read_until(Instant::now()) {
            if message.get("method").is_some() {
                self.keep_event(message);
            }
        }
        self.log.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Chromium's own output (start-up errors and crashes land here).
    pub fn process_output(&self) -> String {
        fs::read_to_string(self.profile.path().join("chromium.log")).unwrap_or_default()
    }

    fn centre_of(&mut self, selector: &str) -> Result<(f64, f64), CdpError> {
        let rect = self.eval(&format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; \
             e.scrollIntoView({{block: 'center', inline: 'center'}}); \
             const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2, r.width, r.height]; }})()",
            sel = js_string(selector)
        ))?;
        let numbers: Vec<f64> = rect
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        match numbers.as_slice() {
            [x, y, w, h] if *w > 0.0 && *h > 0.0 => Ok((*x, *y)),
            [_, _, _, _] => Err(CdpError::BadReply(format!("{selector} is not visible"))),
            _ => Err(CdpError::BadReply(format!("no element matches {selector}"))),
        }
    }

    /// Reads one JSON message, or `None` once `deadline` passes with nothing to read.
    fn read_until(&mut self, deadline: Instant) -> Result<Option<Value>, CdpError> {
        loop {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            self.socket.get_ref().set_read_timeout(Some(left))?;
            match self.socket.read() {
                Ok(Message::Text(text)) => {
                    return serde_json::from_str(text.as_str())
                        .map(Some)
                        .map_err(|e| CdpError::BadReply(format!("not JSON: {e}")));
                }
                Ok(Message::Close(_)) => {
                    return Err(CdpError::Connect("the browser closed the socket".into()));
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn keep_event(&mut self, event: Value) {
        self.follow_document(&event);
        if let Some(line) = describe_log_event(&event) {
            if self.log.len() == MAX_LOG {
                self.log.pop_front();
            }
            self.log.push_back(line);
        }
        // Only a bounded backlog of unawaited events is kept.
        if self.events.len() == MAX_LOG {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    /// Keeps [`Browser::context`] and [`Browser::replaced`] up to date from one event.
    fn follow_document(&mut self, event: &Value) {
        let params = event.get("params").unwrap_or(&Value::Null);
        match event.get("method").and_then(Value::as_str) {
            Some("Runtime.executionContextCreated") => {
                let context = params.get("context").unwrap_or(&Value::Null);
                let main_world = context.pointer("/auxData/isDefault") == Some(&Value::Bool(true))
                    && context.pointer("/auxData/frameId").and_then(Value::as_str)
                        == Some(self.main_frame.as_str());
                if main_world {
                    self.context = context.get("id").and_then(Value::as_u64);
                }
            }
            Some("Runtime.executionContextDestroyed") => {
                let id = params.get("executionContextId").and_then(Value::as_u64);
                if id.is_some() && id == self.context {
                    self.context = None;
                    self.replaced += 1;
                }
            }
            Some("Runtime.executionContextsCleared") => {
                self.context = None;
                self.replaced += 1;
            }
            // The main frame committed another document (its context may already be new).
            Some("Page.frameNavigated") if params.pointer("/frame/parentId").is_none() => {
                self.replaced += 1;
            }
            _ => {}
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ask politely first so Chromium ends its renderers itself, then make sure.
        let _ = self.call("Browser.close", json!({}));
        end_child(&mut self.child);
    }
}

/// Ends the child if launching fails half-way.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            end_child(child);
        }
    }
}

fn end_child(child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    // The renderers share the browser's process group (its id is the browser's pid).
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn wait_for_port(profile: &Path, child: &mut ChildGuard) -> Result<u16, CdpError> {
    let file = profile.join("DevToolsActivePort");
    let deadline = Instant::now() + LAUNCH_TIMEOUT;
    loop {
        // The file is written whole, but may be read between its creation and its write.
        if let Ok(text) = fs::read_to_string(&file)
            && let Some(port) = text.lines().next().and_then(|l| l.trim().parse().ok())
        {
            return Ok(port);
        }
        let exited = child
            .0
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
        if exited || Instant::now() >= deadline {
            let output = fs::read_to_string(profile.join("chromium.log")).unwrap_or_default();
            return Err(CdpError::NoPort(LAUNCH_TIMEOUT, output));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Asks the DevTools endpoint for its targets and returns the first page's socket path.
fn page_socket_path(port: u16) -> Result<String, CdpError> {
    let deadline = Instant::now() + LAUNCH_TIMEOUT;
    loop {
        let targets = http_get(port, "/json/list")?;
        if let Some(id) = targets.as_array().and_then(|list| {
            list.iter()
                .find(|t| t.get("type").and_then(Value::as_str) == Some("page"))
                .and_then(|t| t.get("id").and_then(Value::as_str))
        }) {
            return Ok(format!("/devtools/page/{id}"));
        }
        if Instant::now() >= deadline {
            return Err(CdpError::Connect("Chromium opened no page".into()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A bounded HTTP/1.1 GET on the DevTools endpoint (no client crate for one request; it
/// answers HTTP/1.0 with nothing).
fn http_get(port: u16, path: &str) -> Result<Value, CdpError> {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(COMMAND_TIMEOUT))?;
    stream.set_write_timeout(Some(COMMAND_TIMEOUT))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut reader = BufReader::new(stream.take(4 << 20));
    let mut length = None;
    let mut line = String::new();
    for _ in 0..100 {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let length = length
        .filter(|&n| n <= 4 << 20)
        .ok_or_else(|| CdpError::BadReply(format!("GET {path}: no usable Content-Length")))?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| CdpError::BadReply(format!("GET {path}: {e}")))
}

fn connect(port: u16, path: &str) -> Result<WebSocket<TcpStream>, CdpError> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(COMMAND_TIMEOUT))?;
    stream.set_write_timeout(Some(COMMAND_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let url = format!("ws://127.0.0.1:{port}{path}");
    let (socket, _) = tungstenite::client::client(url.as_str(), stream)
        .map_err(|e| CdpError::Connect(format!("WebSocket handshake with {url}: {e}")))?;
    Ok(socket)
}

fn describe_log_event(event: &Value) -> Option<String> {
    let params = event.get("params")?;
    match event.get("method")?.as_str()? {
        "Runtime.consoleAPICalled" => {
            let kind = params.get("type").and_then(Value::as_str).unwrap_or("log");
            let args: Vec<String> = params
                .get("args")
                .and_then(Value::as_array)
                .map(|args| {
                    args.iter()
                        .map(|a| match a.get("value") {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => a
                                .get("description")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                                .to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(format!("console.{kind}: {}", args.join(" ")))
        }
        "Runtime.exceptionThrown" => {
            let details = params.get("exceptionDetails")?;
            let text = details
                .pointer("/exception/description")
                .or_else(|| details.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            Some(format!("exception: {text}"))
        }
        "Log.entryAdded" => {
            let entry = params.get("entry")?;
            let level = entry.get("level").and_then(Value::as_str).unwrap_or("?");
            let text = entry.get("text").and_then(Value::as_str).unwrap_or("?");
            let url = entry.get("url").and_then(Value::as_str).unwrap_or("");
            Some(format!("log.{level}: {text} {url}").trim_end().to_string())
        }
        _ => None,
    }
}

/// `Runtime.evaluate`'s parameters: promises awaited, the value returned as JSON, as if a
/// person's gesture started it (so the page may open a popup or play media).
fn evaluate_params(expression: &str) -> Value {
    json!({
        "expression": expression,
        "awaitPromise": true,
        "returnByValue": true,
        "userGesture": true,
    })
}

/// The value of an evaluation's `result`, or the exception the page threw.
fn evaluation_value(expression: &str, result: &Value) -> Result<Value, CdpError> {
    if let Some(details) = result.get("exceptionDetails") {
        let text = details
            .pointer("/exception/description")
            .or_else(|| details.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("an exception")
            .to_string();
        return Err(CdpError::Exception {
            expression: expression.to_string(),
            details: text,
        });
    }
    Ok(result
        .pointer("/result/value")
        .cloned()
        .unwrap_or(Value::Null))
}

/// Whether a command failed only because the page was navigating away.
fn navigating(error: &Value) -> bool {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    message.contains("navigated or closed")
        || message.contains("Cannot find context")
        || message.contains("Execution context was destroyed")
        || message.contains("Cannot find default execution context")
        || message.contains("Promise was collected")
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `text` as a JavaScript string literal.
pub fn js_string(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}
