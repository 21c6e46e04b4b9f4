//! The CDP helper against a tiny page served by the test itself on 127.0.0.1: navigate,
//! evaluate, type, click with real mouse events, wait for a condition (and time out), go on
//! waiting in the page that replaces the one a wait began in, take a screenshot, read the
//! page's console, and leave no Chromium behind.
//!
//! Nothing here races the page: every navigation is started by the test (or by the condition
//! it evaluates), and every wait ends on an event or a condition with a generous deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

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

/// The page a navigation from `PAGE` goes to.
const NEXT: &str = "<!doctype html><title>next page</title><p id=\"here\">next</p>";

/// Long enough for a loaded 2-core machine; a passing wait takes milliseconds.
const PATIENCE: Duration = Duration::from_secs(60);

/// Serves `NEXT` at `/next` and `PAGE` at every other path until the test ends; returns the
/// base URL.
fn serve_page() -> String {
    serve_html(Arc::new(|path: &str| {
        if path.starts_with("/next") {
            NEXT
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
        .wait_for("document.getElementById('out').textContent", PATIENCE)
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
    // Long enough for the page to answer at least once on a loaded machine.
    let error = browser
        .wait_for(
            "document.querySelector('#absent').id",
            Duration::from_secs(3),
        )
        .unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(3), "{waited:?}");
    // Bounded by the wait, not by the 30 s a single command may take.
    assert!(waited < Duration::from_secs(20), "{waited:?}");
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
    let deadline = Instant::now() + PATIENCE;
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

/// A wait whose condition navigates away before it can answer: its first evaluation is never
/// answered (the page is replaced under the pending promise), and the wait goes on in the
/// next page as soon as that page's JavaScript context exists.
#[test]
fn a_wait_goes_on_in_the_page_that_replaces_the_one_it_began_in() {
    let Some(chromium) = chromium_or_skip("a_wait_goes_on_in_the_page_that_replaces") else {
        return;
    };
    let url = serve_page();
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&url).unwrap();
    let condition = "new Promise(r => { if (document.title === 'next page') r(location.pathname); \
                     else location.href = '/next'; })";
    let found = browser.wait_for(condition, PATIENCE).unwrap();
    assert_eq!(found, "/next");

    // A click on a link, then a wait for what only the next page has.
    browser.navigate(&url).unwrap();
    browser
        .eval(
            "(() => { const a = document.createElement('a'); a.id = 'link'; a.href = '/next'; \
             a.textContent = 'next'; document.body.prepend(a); return true; })()",
        )
        .unwrap();
    browser.click("#link").unwrap();
    let here = browser
        .wait_for("document.getElementById('here').textContent", PATIENCE)
        .unwrap();
    assert_eq!(here, "next");
    let log = browser.log_text();
    assert!(!log.contains("exception:"), "{log}");
}

/// One slow evaluation is awaited as long as the wait lasts: a condition that takes 3 s
/// to answer is not cut short and asked again (and again) in the meantime.
#[test]
fn a_slow_condition_is_not_cut_short() {
    let Some(chromium) = chromium_or_skip("a_slow_condition_is_not_cut_short") else {
        return;
    };
    let url = serve_page();
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&url).unwrap();
    browser.eval("window.__asked = 0; true").unwrap();
    let value = browser
        .wait_for(
            "(window.__asked += 1, new Promise(r => setTimeout(() => r('slow'), 3000)))",
            PATIENCE,
        )
        .unwrap();
    assert_eq!(value, "slow");
    assert_eq!(browser.eval("window.__asked").unwrap(), 1);
}

/// `navigate` returns once the document it asked for has loaded, even when the page before it
/// had loaded too (an earlier load event is never taken for this one).
#[test]
fn navigate_waits_for_its_own_document() {
    let Some(chromium) = chromium_or_skip("navigate_waits_for_its_own_document") else {
        return;
    };
    let url = serve_page();
    let mut browser = Browser::launch(&chromium).unwrap();
    for round in 0..5 {
        browser.navigate(&url).unwrap();
        assert_eq!(browser.eval("document.title").unwrap(), "cdp fixture");
        browser.navigate(&format!("{url}next?{round}")).unwrap();
        assert_eq!(
            browser
                .eval("document.readyState + ' ' + document.title")
                .unwrap(),
            "complete next page"
        );
    }
}
