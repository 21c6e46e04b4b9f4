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
/// Longest one evaluation of a wait may take before it is asked again.
const EVAL_ATTEMPT: Duration = Duration::from_secs(2);
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
            events: VecDeque::new(),
            log: VecDeque::new(),
        };
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.call(domain, json!({}))?;
        }
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

    /// Opens `url` and waits (bounded) until its `load` event.
    pub fn navigate(&mut self, url: &str) -> Result<(), CdpError> {
        self.events.clear();
        let result = self.call("Page.navigate", json!({ "url": url }))?;
        if let Some(error) = result.get("errorText").and_then(Value::as_str) {
            return Err(CdpError::Command {
                method: "Page.navigate".into(),
                error: json!(error),
            });
        }
        self.wait_event("Page.loadEventFired", COMMAND_TIMEOUT)?;
        Ok(())
    }

    /// Waits for the next event named `method` (one already read counts).
    pub fn wait_event(&mut self, method: &str, timeout: Duration) -> Result<Value, CdpError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self
                .events
                .iter()
                .position(|e| e.get("method").and_then(Value::as_str) == Some(method))
            {
                // Drop what came before it: those events are older than the one awaited.
                let event = self.events.drain(..=at).next_back().unwrap_or(Value::Null);
                return Ok(event.get("params").cloned().unwrap_or(Value::Null));
            }
            match self.read_until(deadline)? {
                Some(message) if message.get("method").is_some() => self.keep_event(message),
                Some(_) => {}
                None => {
                    return Err(CdpError::Timeout {
                        method: method.to_string(),
                        timeout,
                    });
                }
            }
        }
    }

    /// Evaluates `expression` in the page (promises awaited) and returns its value as JSON.
    pub fn eval(&mut self, expression: &str) -> Result<Value, CdpError> {
        self.eval_until(expression, Instant::now() + COMMAND_TIMEOUT)
    }

    fn eval_until(&mut self, expression: &str, deadline: Instant) -> Result<Value, CdpError> {
        let result = self.call_until(
            "Runtime.evaluate",
            json!({
                "expression": expression,
                "awaitPromise": true,
                "returnByValue": true,
                "userGesture": true,
            }),
            deadline,
        )?;
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

    /// Re-evaluates `condition` until it is truthy and returns that value; after `timeout`
    /// the error carries the last value and the page's log. An exception counts as "not yet"
    /// (the element may not exist yet).
    pub fn wait_for(&mut self, condition: &str, timeout: Duration) -> Result<Value, CdpError> {
        let deadline = Instant::now() + timeout;
        loop {
            // One evaluation never outlives the wait: a promise whose page is replaced under
            // it may never be answered.
            let attempt = deadline
                .min(Instant::now() + EVAL_ATTEMPT)
                .max(Instant::now() + POLL_INTERVAL);
            let last = match self.eval_until(condition, attempt) {
                Ok(value) if truthy(&value) => return Ok(value),
                Ok(value) => value.to_string(),
                Err(CdpError::Exception { details, .. }) => details,
                Err(CdpError::Timeout { .. }) => "no answer (the page was being replaced)".into(),
                // A page being replaced by the next one (a click that navigates) has no
                // context to evaluate in for a moment.
                Err(CdpError::Command { error, .. }) if navigating(&error) => error.to_string(),
                Err(other) => return Err(other),
            };
            if Instant::now() >= deadline {
                return Err(CdpError::Wait {
                    condition: condition.to_string(),
                    timeout,
                    last,
                    log: self.log_text(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
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

/// Whether a command failed only because the page was navigating away.
fn navigating(error: &Value) -> bool {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    message.contains("navigated or closed")
        || message.contains("Cannot find context")
        || message.contains("Execution context was destroyed")
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
