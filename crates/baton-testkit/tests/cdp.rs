//! The CDP helper against a tiny page served by the test itself on 127.0.0.1: navigate,
//! evaluate, type, click with real mouse events, wait for a condition (and time out), take a
//! screenshot, read the page's console, and leave no Chromium behind.

use baton_testkit::cdp::{Browser, CdpError, chromium_or_skip};
use baton_testkit::html_server::serve_html;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAGE: &str = r#"<!doctype html>
<html><head><title>cdp fixture</title></head>
<body>
<form id="f"><input id="name"><button id="go" type="submit">Go</button></form>
<p id="out"></p>
<script>
document.getElementById('f').addEventListener('submit', (e) => {
  e.preventDefault();
  console.log('submitted', document.getElementById('name').value);
  setTimeout(() => {
    document.getElementById('out').textContent = 'hello ' + document.getElementById('name').value;
  }, 200);
});
</script>
</body></html>"#;

/// A page that reloads itself every few milliseconds: there is often no page to evaluate in.
const RELOADING: &str = "<!doctype html><title>reloading</title>\
    <script>setTimeout(() => location.reload(), 5)</script>";

/// Serves `RELOADING` at `/reloading` and `PAGE` at every other path until the test ends;
/// returns the base URL.
fn serve_page() -> String {
    serve_html(Arc::new(|path: &str| {
        if path.starts_with("/reloading") {
            RELOADING
        } else {
            PAGE
        }
        .to_string()
    }))
}

#[test]
fn drives_a_page_typing_clicking_and_waiting() {
    let Some(chromium) = chromium_or_skip("drives_a_page_typing_clicking_and_waiting") else {
        return;
    };
    let url = serve_page();
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&url).unwrap();
    assert_eq!(browser.eval("document.title").unwrap(), "cdp fixture");
    assert_eq!(
        browser
            .eval("new Promise(r => setTimeout(() => r(6 * 7), 10))")
            .unwrap(),
        42
    );

    browser.type_into("#name", "baton").unwrap();
    browser.click("#go").unwrap();
    let text = browser
        .wait_for(
            "document.getElementById('out').textContent",
            Duration::from_secs(10),
        )
        .unwrap();
    assert_eq!(text, "hello baton");
    assert!(
        browser.log_text().contains("console.log: submitted baton"),
        "{}",
        browser.log_text()
    );

    let png = browser.screenshot().unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn a_wait_that_never_comes_true_times_out_with_the_page_log() {
    let Some(chromium) = chromium_or_skip("a_wait_that_never_comes_true_times_out") else {
        return;
    };
    let url = serve_page();
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&url).unwrap();
    browser.eval("console.warn('still waiting')").unwrap();
    let started = Instant::now();
    let error = browser
        .wait_for(
            "document.querySelector('#absent').id",
            Duration::from_millis(500),
        )
        .unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(500), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    match &error {
        CdpError::Wait { last, log, .. } => {
            assert!(last.contains("TypeError"), "{last}");
            assert!(log.contains("console.warning: still waiting"), "{log}");
        }
        other => panic!("expected CdpError::Wait, got {other}"),
    }
    assert!(error.to_string().starts_with("CDP_WAIT"));

    // A missing element is an error, not a click somewhere else.
    assert!(browser.click("#absent").is_err());
    // A page exception is reported with its message.
    match browser.eval("null.x") {
        Err(CdpError::Exception { details, .. }) => assert!(details.contains("TypeError")),
        other => panic!("expected an exception, got {other:?}"),
    }
}

#[test]
fn dropping_the_browser_ends_chromium() {
    let Some(chromium) = chromium_or_skip("dropping_the_browser_ends_chromium") else {
        return;
    };
    let browser = Browser::launch(&chromium).unwrap();
    let pid = browser.pid();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(browser);
    // The browser and its process group (renderers, zygote) are gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = group_members(pid);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Live (not zombie) processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state ppid pgrp ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_wait_goes_on_while_the_page_navigates() {
    let Some(chromium) = chromium_or_skip("a_wait_goes_on_while_the_page_navigates") else {
        return;
    };
    let url = serve_page();
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&format!("{url}reloading")).unwrap();
    // Evaluating while the page keeps replacing itself: the wait times out as a wait, not on
    // the first evaluation that finds no page.
    for _ in 0..3 {
        // A condition that takes a moment (a promise): the page often goes away under it.
        let condition = "new Promise(r => setTimeout(() => r(document.title === 'never'), 20))";
        match browser.wait_for(condition, Duration::from_millis(700)) {
            Err(CdpError::Wait { .. }) => {}
            other => panic!("expected CdpError::Wait, got {other:?}"),
        }
    }
    // And a wait for something that does come true across navigations finds it.
    browser.navigate(&url).unwrap();
    browser
        .wait_for("document.title === 'cdp fixture'", Duration::from_secs(10))
        .unwrap();
}
