//! `baton serve` in a real browser: headless Chromium driven over CDP (baton_testkit::cdp)
//! against the real `baton serve` binary on 127.0.0.1 with its own BATON_HOME.
//!
//! A person's path: open the runs page with the token, start the demo from the start page (the
//! bundled create-story package on a fresh copy of the sample project, answered by its recorded
//! trace, whose question waits for a person), see the graph with the first node current and
//! the question as a form, answer it, and watch the nodes turn completed until the run is
//! completed. The timeline follows the audit log live (SSE): lines appended to the log show up
//! in the page, and the time they take is printed (docs/BENCHMARKS.md).
//!
//! And what another site can do from the same browser: a page on another port (another
//! origin, the same site, so the `SameSite=Strict` cookie goes along) posts to the API with
//! `fetch` and with a plain form, and a name that resolves to 127.0.0.1 (DNS rebinding) opens
//! the server with its token: all refused, no run started.
//!
//! The epic board: an epic autopilot (the played model of the autopilot tests on loopback)
//! waits on a question; the person answers it on the board and sees the stories move to done.
//!
//! A lifecycle session (`baton demo session`): the project's sessions list leads to its page,
//! whose steps and decisions match its files.
//!
//! A run started from the start form with a live model (the demo's answers from a scripted
//! server on loopback, each 400 ms late): each node is seen turning completed, in order.
//!
//! The widgets' script: a model asks with `ui.ask_user` for a selection, a confirmation and a
//! form; each is filled in and sent from the page and reaches the model as its submission.
//!
//! Screenshots go to `target/tmp/serve_browser/` (test artifacts). The one in the README is
//! `docs/img/serve-run.png`, copied from `live-model-running.png` by hand when the pages
//! change.
//!
//! Skips (saying so) without Chromium unless BATON_REQUIRE_BROWSER is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::player;

use baton_llm::testing::{Reply, ScriptedServer};
use baton_testkit::cdp::{Browser, chromium_or_skip};
use baton_testkit::html_server::serve_html;
use serde_json::Value;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// Long enough for a loaded 2-core CI machine (bench/flaky.sh); a passing step takes well
/// under a second. Every wait ends on its condition, never on a fixed delay.
const STEP: Duration = Duration::from_secs(60);

/// The running `baton serve`, killed when dropped.
struct Serve {
    child: Child,
    url: String,
    token: String,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `baton serve --json` with no model configured; the demo's project copy goes under
/// `tmp` (TMPDIR).
fn start_serve(home: &Path, tmp: &Path) -> Serve {
    start_serve_with(home, tmp, &[])
}

/// [`start_serve`] with more environment (e.g. the model the server's runs use).
fn start_serve_with(home: &Path, tmp: &Path, env: &[(&str, String)]) -> Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .args(["serve", "--port", "0", "--json"])
        .current_dir(baton_testkit::repo())
        .env("BATON_HOME", home)
        .env("TMPDIR", tmp)
        .env_remove("OPENAI_API_KEY")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton serve starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(STEP).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("baton serve printed nothing within {STEP:?}")
    });
    let printed: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("baton serve --json printed {line:?}: {e}"));
    let url = printed["url"].as_str().unwrap().to_string();
    let port = u16::try_from(printed["port"].as_u64().unwrap()).unwrap();
    let token = printed["token"].as_str().unwrap().to_string();
    assert!(url.contains(&token), "the URL carries the token: {url}");
    assert!(url.contains(&format!("127.0.0.1:{port}")), "{url}");
    Serve {
        child,
        url,
        token,
        port,
    }
}

/// Where this test's screenshots go.
fn shots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_browser")
}

/// The `data-status` of every node of the graph, in document order.
const NODE_STATES: &str = "Array.from(document.querySelectorAll('#graph-svg [data-node-id]'))\
    .map(n => [n.dataset.nodeId, n.dataset.status])";

fn node_states(browser: &mut Browser) -> Vec<(String, String)> {
    let value = browser.eval(NODE_STATES).unwrap();
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Waits until `condition` holds on a page that is fully loaded (an element found while the
/// page is still being parsed may come before its siblings).
fn wait(browser: &mut Browser, what: &str, condition: &str) -> Value {
    let condition = format!("document.readyState === 'complete' && ({condition})");
    match browser.wait_for(&condition, STEP) {
        Ok(value) => value,
        Err(e) => {
            let _ = browser.save_screenshot(&shots().join("failure.png"));
            panic!(
                "waiting for {what}: {e}\n(screenshot: {})",
                shots().display()
            )
        }
    }
}

/// A condition true once the page shows `project` opened by the project form (a GET with
/// `?project=`), so nothing on the page the form left is taken for its answer.
fn opened_project(project: &str) -> String {
    format!(
        "new URLSearchParams(location.search).get('project') === {}",
        serde_json::to_string(project).unwrap()
    )
}

#[test]
fn a_person_starts_the_demo_answers_its_question_and_sees_it_complete() {
    let Some(chromium) = chromium_or_skip("serve_browser") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let serve = start_serve(home.path(), tmp.path());
    let mut browser = Browser::launch(&chromium).unwrap();

    // The runs page, opened with the token, is empty.
    browser.navigate(&serve.url).unwrap();
    wait(
        &mut browser,
        "the empty runs page",
        "!!document.getElementById('runs-empty')",
    );
    browser
        .save_screenshot(&shots().join("runs-empty.png"))
        .unwrap();

    // Start the demo from the start page.
    browser.click("#start-link").unwrap();
    wait(
        &mut browser,
        "the start page",
        "!!document.getElementById('demo-submit')",
    );
    browser.save_screenshot(&shots().join("start.png")).unwrap();
    browser.click("#demo-submit").unwrap();

    // The run page: the question as a form, the first node current, the others pending.
    wait(
        &mut browser,
        "the run page with its question",
        "location.pathname.startsWith('/runs/') && !!document.getElementById('answer-text')",
    );
    let states = node_states(&mut browser);
    assert_eq!(states.len(), 6, "{states:?}");
    assert_eq!(
        states[0],
        ("step-01-select-story".into(), "current".into()),
        "{states:?}"
    );
    assert!(
        states[1..].iter().all(|(_, s)| s == "pending"),
        "{states:?}"
    );
    let question = browser
        .eval("document.getElementById('question-text').textContent")
        .unwrap();
    assert!(
        question.as_str().is_some_and(|q| q.contains("story")),
        "{question}"
    );
    browser
        .save_screenshot(&shots().join("run-question.png"))
        .unwrap();

    // Every change of the graph's node states from here on, as the page sees it.
    browser
        .eval(&format!(
            "window.__states = []; const snap = () => {{ \
               const s = JSON.stringify({NODE_STATES}); \
               if (window.__states[window.__states.length - 1] !== s) window.__states.push(s); }}; \
             snap(); new MutationObserver(snap).observe(document.body, \
               {{childList: true, subtree: true, attributes: true}}); true"
        ))
        .unwrap();

    // Answer in the form; the run goes on in the background and the page follows it.
    browser
        .type_into("#answer-text", "1-2-user-authentication")
        .unwrap();
    browser.click("#answer-submit").unwrap();
    wait(
        &mut browser,
        "the run to complete",
        "document.getElementById('run-phase').dataset.phase === 'completed'",
    );
    wait(
        &mut browser,
        "every node completed on the graph",
        &format!("{NODE_STATES}.every(([_, s]) => s === 'completed')"),
    );
    wait(
        &mut browser,
        "the question to go",
        "document.getElementById('answer-form') === null",
    );
    let seen: Vec<String> =
        serde_json::from_value(browser.eval("window.__states").unwrap()).unwrap();
    eprintln!("graph states seen after the answer ({}):", seen.len());
    for states in &seen {
        eprintln!("  {states}");
    }
    assert!(seen.len() >= 2, "the graph changed in place: {seen:?}");
    // The timeline shows the engine's and the tools' events of the whole run.
    let timeline = wait(
        &mut browser,
        "the timeline",
        "document.querySelectorAll('#timeline li').length > 10 && \
         document.getElementById('timeline').textContent",
    );
    let timeline = timeline.as_str().unwrap();
    assert!(timeline.contains("engine.start"), "{timeline}");
    assert!(timeline.contains("tool.exec"), "{timeline}");
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("run-completed.png"))
        .unwrap();

    // The story the answer chose was written in the run's project.
    let run_id = browser
        .eval("document.getElementById('run').dataset.runId")
        .unwrap();
    let run_id = run_id.as_str().unwrap().to_string();
    let shown = browser
        .eval(&format!(
            "fetch('/api/runs/{run_id}', {{credentials: 'same-origin'}}).then(r => r.json())"
        ))
        .unwrap();
    let root = shown["projectRoot"]
        .as_str()
        .unwrap_or_else(|| panic!("GET /api/runs/{run_id}: {shown}"));
    assert!(
        Path::new(root).starts_with(tmp.path()) || Path::new(root).starts_with(home.path()),
        "the demo project is in this test's directories: {root}"
    );
    assert!(
        Path::new(root)
            .join("artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );

    // The story file, previewed in the page through the run's mounts.
    let story = browser
        .eval(
            "Array.from(document.querySelectorAll('button.artifact'))\
             .findIndex(b => b.textContent.includes('stories/1-2-user-authentication.md'))",
        )
        .unwrap();
    let story = story.as_i64().unwrap();
    assert!(story >= 0, "the story is listed among the artifacts");
    browser.click(&format!("#artifact-{story}")).unwrap();
    let preview = wait(
        &mut browser,
        "the artifact preview",
        "(t => t && t !== 'Loading…' && t)(document.getElementById('artifact-preview').textContent)",
    );
    let on_disk =
        fs::read_to_string(Path::new(root).join("artifacts/stories/1-2-user-authentication.md"))
            .unwrap();
    assert_eq!(preview.as_str().unwrap(), on_disk);

    audit_lines_reach_the_page(&mut browser, home.path(), &run_id);

    // The runs page lists the run, completed, and its row leads back to it.
    browser.click("#nav-runs").unwrap();
    let phase = wait(
        &mut browser,
        "the run in the runs list",
        &format!(
            "location.pathname === '/' && (b => b && b.textContent)\
             (document.querySelector('tr[data-run-id=\"{run_id}\"] .phase'))"
        ),
    );
    assert_eq!(phase, "completed");
    browser.save_screenshot(&shots().join("runs.png")).unwrap();
    browser
        .click(&format!("tr[data-run-id=\"{run_id}\"] a"))
        .unwrap();
    wait(
        &mut browser,
        "the run page from the list",
        &format!(
            "location.pathname === '/runs/{run_id}' && !!document.getElementById('graph-svg')"
        ),
    );

    // Nothing the page did was refused by its CSP or threw.
    let log = browser.log_text();
    eprintln!("page log:\n{log}");
    assert!(!log.contains("exception:"), "{log}");
    assert!(!log.contains("Content Security Policy"), "{log}");
}

/// Appends lines to the run's audit log and times each until the page's timeline shows it:
/// the page stamps the moment its DOM gets the line (a MutationObserver), the test the moment
/// before the append, both on the wall clock. Prints the median (docs/BENCHMARKS.md).
fn audit_lines_reach_the_page(browser: &mut Browser, home: &Path, run_id: &str) {
    let log = fs::read_dir(home.join("projects"))
        .unwrap()
        .flatten()
        .map(|p| {
            p.path()
                .join("runs")
                .join(run_id)
                .join("state/logs/execution.jsonl")
        })
        .find(|p| p.is_file())
        .expect("the run's audit log");
    browser
        .eval(
            "window.__seen = {}; new MutationObserver(() => { \
               for (const li of document.querySelectorAll('#timeline li')) { \
                 const m = li.textContent.match(/latency-probe-(\\d+)/); \
                 if (m && !(m[1] in window.__seen)) \
                   window.__seen[m[1]] = performance.timeOrigin + performance.now(); } \
             }).observe(document.getElementById('timeline'), {childList: true, subtree: true, characterData: true}); true",
        )
        .unwrap();
    let mut latencies = Vec::new();
    for seq in 0..20u32 {
        let marker = format!("latency-probe-{seq}");
        let line = serde_json::json!({
            "ts": "2026-11-22T00:00:00Z",
            "kind": "engine.note",
            "runId": run_id,
            "message": marker,
        });
        let appended = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        {
            let mut file = fs::OpenOptions::new().append(true).open(&log).unwrap();
            file.write_all(format!("{line}\n").as_bytes()).unwrap();
        }
        let seen = wait(
            browser,
            "an appended audit line in the timeline",
            &format!("window.__seen[{seq}]"),
        );
        latencies.push(seen.as_f64().unwrap() - appended);
        // Spread the appends over the server's polling period.
        std::thread::sleep(Duration::from_millis(13 * (1 + u64::from(seq % 7))));
    }
    latencies.sort_by(f64::total_cmp);
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "audit line -> page timeline: median {median:.1} ms, max {:.1} ms over {} lines",
        latencies[latencies.len() - 1],
        latencies.len()
    );
    // A bound on liveness (the page follows the log), generous enough for a loaded 2-core
    // machine; the figure itself is in docs/BENCHMARKS.md.
    assert!(median < 5000.0, "median {median} ms");
}

/// Serves `html` at every path from 127.0.0.1 on a port of its own: another origin (the port
/// differs) but the same site (ports do not count), so a `SameSite=Strict` cookie still goes
/// along with its requests. Returns its URL.
fn serve_foreign_page(html: String) -> String {
    serve_html(Arc::new(move |_: &str| html.clone()))
}

/// Run directories (`run.json`) under the store.
fn runs_in(home: &Path) -> usize {
    fn walk(dir: &Path, found: &mut usize) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.file_name().is_some_and(|n| n == "run.json") {
                *found += 1;
            }
        }
    }
    let mut found = 0;
    walk(home, &mut found);
    found
}

#[test]
fn another_site_and_a_rebound_name_get_nothing_from_the_browser() {
    let Some(chromium) = chromium_or_skip("serve_browser_security") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let serve = start_serve(home.path(), tmp.path());
    let base = format!("http://127.0.0.1:{}", serve.port);
    // `rebound.test` resolves to loopback, as a DNS-rebinding attacker's name would.
    let mut browser = Browser::launch_with(
        &chromium,
        &["--host-resolver-rules=MAP rebound.test 127.0.0.1"],
    )
    .unwrap();

    // A person opens the page: the cookie is set, and the page's script cannot read it.
    browser.navigate(&serve.url).unwrap();
    wait(
        &mut browser,
        "the runs page",
        "!!document.getElementById('runs-table') || !!document.getElementById('runs-empty')",
    );
    let cookie = browser.eval("document.cookie").unwrap();
    assert!(
        !cookie.as_str().unwrap_or("").contains(&serve.token),
        "the cookie is HttpOnly: {cookie}"
    );
    assert!(
        !browser
            .eval("location.search")
            .unwrap()
            .as_str()
            .unwrap()
            .contains("token"),
        "the token leaves the address bar"
    );

    // Another page on the same machine tries to start a run with the person's cookie.
    let foreign =
        serve_foreign_page("<!doctype html><title>elsewhere</title><p>elsewhere</p>".into());
    browser.navigate(&foreign).unwrap();
    let target = format!("{base}/api/runs");
    let attempt = browser
        .eval(&format!(
            "fetch({t}, {{method: 'POST', mode: 'no-cors', credentials: 'include', \
               headers: {{'Content-Type': 'text/plain'}}, body: JSON.stringify({{replay: 'demo'}})}}) \
             .then(r => r.type, e => 'failed: ' + e)",
            t = serde_json::to_string(&target).unwrap()
        ))
        .unwrap();
    // The request goes out; the browser hides the answer (or, the answer carrying
    // `Cross-Origin-Resource-Policy: same-origin`, fails the fetch). What matters is on the
    // server's side: no run is started (checked below).
    let attempt = attempt.as_str().unwrap();
    assert!(
        attempt == "opaque" || attempt.starts_with("failed"),
        "{attempt}"
    );
    let read = browser
        .eval(&format!(
            "fetch({t}, {{credentials: 'include'}}).then(r => r.text()).then(t => 'read: ' + t, e => 'blocked: ' + e)",
            t = serde_json::to_string(&target).unwrap()
        ))
        .unwrap();
    assert!(
        read.as_str().unwrap().starts_with("blocked"),
        "another origin cannot read the runs: {read}"
    );
    // A plain form post (no script needed, the classic CSRF) lands on the server's refusal.
    browser
        .eval(&format!(
            "const f = document.createElement('form'); f.method = 'POST'; f.action = {t}; \
             f.enctype = 'text/plain'; const i = document.createElement('input'); \
             i.name = '{{\"replay\":\"demo\",\"x\":\"'; i.value = '\"}}'; f.append(i); \
             document.body.append(f); f.submit(); true",
            t = serde_json::to_string(&target).unwrap()
        ))
        .unwrap();
    // The answer is the document the post navigated to (waited for by its address, so the
    // page it left can never be taken for it).
    let answer = wait(
        &mut browser,
        "the form post's answer",
        "location.pathname === '/api/runs' && document.body && document.body.textContent",
    );
    eprintln!("a cross-site form post gets: {answer}");
    assert!(
        answer.as_str().unwrap().contains("ORIGIN_REFUSED"),
        "refused: {answer}"
    );

    // A name that resolves to 127.0.0.1 is not this server, even with the token.
    browser
        .navigate(&format!(
            "http://rebound.test:{}/?token={}",
            serve.port, serve.token
        ))
        .unwrap();
    let rebound = wait(
        &mut browser,
        "the rebound page",
        "document.body && document.body.textContent",
    );
    assert!(
        browser.eval("document.getElementById('main') === null && !document.querySelector('meta[name=\"baton-token\"]')").unwrap() == true,
        "no page for a foreign Host: {rebound}"
    );
    eprintln!("a rebound name gets: {rebound}");
    assert!(
        rebound.as_str().unwrap().contains("HOST_REFUSED"),
        "{rebound}"
    );
    assert!(!rebound.as_str().unwrap().contains(&serve.token));

    // Nothing was started, and the person's page still works.
    assert_eq!(runs_in(home.path()), 0);
    browser.navigate(&format!("{base}/")).unwrap();
    wait(
        &mut browser,
        "the runs page again",
        "!!document.getElementById('runs-empty')",
    );
}

/// The epic board: an epic autopilot waits on a question (asked by the played model in the
/// first story's validate phase); the person answers it in place on the board, and the board
/// follows the loop in the background until every story of the epic is done.
#[test]
fn the_epic_board_answers_a_pending_question_in_place() {
    let Some(chromium) = chromium_or_skip("serve_browser_epic") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/taskboard-epic"),
        &project,
    );
    let p = project.to_str().unwrap();
    let played = player::Player::start(
        &project,
        player::Scenario {
            questions: vec![(
                "2-1-create-board".into(),
                "validate".into(),
                1,
                "Kanban or list?".into(),
            )],
            // Slow enough that the board can be seen moving, fast enough for CI.
            delay: Duration::from_millis(20),
            ..Default::default()
        },
    );
    let model = [
        ("OPENAI_BASE_URL", played.base_url()),
        ("BATON_MODEL", "played".to_string()),
        ("OPENAI_API_KEY", "sk-test".to_string()),
    ];
    let waiting = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["epic", "run", "2", "-p", p, "--json"])
        .env("BATON_HOME", home.path())
        .envs(model.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        waiting.status.code(),
        Some(10),
        "the epic waits on the question: {}",
        String::from_utf8_lossy(&waiting.stderr)
    );

    let serve = start_serve_with(home.path(), tmp.path(), &model);
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&serve.url).unwrap();
    browser.click("#nav-epic").unwrap();
    wait(
        &mut browser,
        "the epic page",
        "location.pathname === '/epic' && !!document.getElementById('project-input')",
    );
    browser.type_into("#project-input", p).unwrap();
    browser.click("#project-open").unwrap();

    let form = "#answer-2-1-create-board-q1";
    // On the page the form opened, not the one before it (which may show the board already).
    wait(
        &mut browser,
        "the pending question on the board",
        &format!(
            "{} && !!document.querySelector('{form}')",
            opened_project(p)
        ),
    );
    let question = browser
        .eval(&format!("document.querySelector('{form} .q').textContent"))
        .unwrap();
    assert_eq!(question, "Kanban or list?");
    let column = browser
        .eval(
            "document.querySelector('.story[data-story=\"2-1-create-board\"]')\
             .closest('.column').dataset.status",
        )
        .unwrap();
    assert_ne!(column, "done", "the story is not done before the answer");
    // The board before the answer is the first one seen: whatever the page shows first after
    // it (the loop may be done by then on a busy machine), the board is seen to change.
    let columns = "Array.from(document.querySelectorAll('.column[data-status]')) \
        .map(c => c.dataset.status + ': ' + Array.from(c.querySelectorAll('.story')) \
          .map(x => x.dataset.story).join(' ')).join(' | ')";
    let before = browser.eval(columns).unwrap();
    let mut seen: Vec<String> = vec![before.as_str().unwrap().to_string()];
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("epic-question.png"))
        .unwrap();

    browser
        .type_into(&format!("{form}-text"), "Kanban")
        .unwrap();
    browser.click(&format!("{form} button")).unwrap();
    // The page reloads after the answer and then follows the loop: every distinct board it
    // shows is kept until both stories are done.
    let deadline = std::time::Instant::now() + 3 * STEP;
    loop {
        // A reload in progress has no board for a moment: not a state.
        if let Ok(Value::String(board)) = browser.eval(columns)
            && !board.is_empty()
            && seen.last() != Some(&board)
        {
            seen.push(board);
        }
        let last = seen.last().map_or("", String::as_str);
        if last.contains("done: 2-1-create-board 2-2-move-task")
            || last.contains("done: 2-2-move-task 2-1-create-board")
        {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = browser.save_screenshot(&shots().join("epic-failure.png"));
            panic!(
                "the epic is not done on the board: {seen:#?}\n{}",
                browser.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("boards seen after the answer ({}):", seen.len());
    for board in &seen {
        eprintln!("  {board}");
    }
    assert!(seen.len() >= 2, "the board changed: {seen:?}");
    assert!(
        browser
            .eval("document.querySelectorAll('form.epic-answer').length === 0")
            .unwrap()
            == true,
        "no question left on the board"
    );
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("epic-done.png"))
        .unwrap();

    // The loop went on from the phase that asked (the played model asks until the answer is
    // in its conversation) to the last story's review.
    let state: Value = serde_json::from_slice(
        &fs::read(project.join("_bmad-output/implementation-artifacts/.run-epic-state.json"))
            .unwrap(),
    )
    .unwrap();
    let steps: Vec<(String, String)> = state["lastSteps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["storyKey"].as_str().unwrap_or("").to_string(),
                s["phase"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        steps.contains(&("2-1-create-board".into(), "validate".into())),
        "{state:#}"
    );
    assert_eq!(
        steps.last(),
        Some(&("2-2-move-task".into(), "code-review".into())),
        "{state:#}"
    );
}

/// A lifecycle session (the offline `baton demo session`: one fix loop) in the browser: the
/// project's sessions list leads to the session, whose steps, icons and decisions are those of
/// its `status.json` and `decisions.ndjson`.
#[test]
fn a_lifecycle_session_shows_its_steps_and_decisions() {
    let Some(chromium) = chromium_or_skip("serve_browser_session") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("csvsum");
    let demo = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["demo", "session", "--json", "--dir"])
        .arg(&project)
        .env("BATON_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let session: Value = serde_json::from_slice(&demo.stdout).unwrap();
    let id = session["session_id"].as_str().unwrap();
    let status: Value =
        serde_json::from_slice(&fs::read(session["status_json"].as_str().unwrap()).unwrap())
            .unwrap();
    let steps = status["steps"].as_array().unwrap();

    let serve = start_serve(home.path(), tmp.path());
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&serve.url).unwrap();
    browser.click("#nav-sessions").unwrap();
    wait(
        &mut browser,
        "the sessions page",
        "location.pathname === '/sessions' && !!document.getElementById('project-input')",
    );
    browser
        .type_into("#project-input", project.to_str().unwrap())
        .unwrap();
    browser.click("#project-open").unwrap();
    let row = format!("tr[data-session-id=\"{id}\"]");
    // On the page the form opened (the page before it may list the project already: a click
    // there would race the form's navigation).
    wait(
        &mut browser,
        "the session in the list",
        &format!(
            "{} && !!document.querySelector('{row}')",
            opened_project(project.to_str().unwrap())
        ),
    );
    browser.click(&format!("{row} a")).unwrap();
    let shown = wait(
        &mut browser,
        "the session's steps",
        "document.querySelectorAll('#steps li[data-index]').length > 0 && \
         Array.from(document.querySelectorAll('#steps li[data-index]')) \
           .map(li => [Number(li.dataset.index), li.dataset.status])",
    );
    let shown: Vec<(u64, String)> = serde_json::from_value(shown).unwrap();
    let expected: Vec<(u64, String)> = steps
        .iter()
        .map(|s| {
            (
                s["index"].as_u64().unwrap(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(shown, expected);
    let badge = browser
        .eval("document.getElementById('session-status').textContent")
        .unwrap();
    assert!(badge.as_str().unwrap().contains("completed"), "{badge}");
    let decisions = browser
        .eval("document.querySelectorAll('#decisions li').length")
        .unwrap();
    assert!(
        decisions.as_u64().unwrap() > 0,
        "the decisions log is shown"
    );
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("session.png"))
        .unwrap();
}

/// A run started from the start form with a live model (the demo's recorded answers served by
/// a scripted OpenAI-compatible server on loopback, each 400 ms late): the page
/// shows each node turn completed, one after another, without a reload.
#[test]
fn a_run_started_from_the_form_shows_each_node_turn_completed() {
    let Some(chromium) = chromium_or_skip("serve_browser_live_model") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let trace = baton_llm::Trace::load(&baton_testkit::demo_trace()).unwrap();
    let replies = Reply::from_trace(&trace)
        .into_iter()
        .map(|r| r.delayed(Duration::from_millis(400)))
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let model = runtime.block_on(ScriptedServer::start(replies)).unwrap();
    let serve = start_serve_with(
        home.path(),
        tmp.path(),
        &[
            ("OPENAI_BASE_URL", model.base_url()),
            ("BATON_MODEL", "scripted".to_string()),
            ("OPENAI_API_KEY", "sk-test".to_string()),
        ],
    );
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&serve.url).unwrap();
    browser.click("#start-link").unwrap();
    wait(
        &mut browser,
        "the start form",
        "!!document.getElementById('start-form')",
    );
    let package = baton_testkit::example("create-story-micro");
    browser
        .type_into("#start-package", package.to_str().unwrap())
        .unwrap();
    browser
        .type_into("#start-project", project.to_str().unwrap())
        .unwrap();
    browser.type_into("#start-model", "scripted").unwrap();
    browser.click("#start-submit").unwrap();
    wait(
        &mut browser,
        "the run's question",
        "location.pathname.startsWith('/runs/') && !!document.getElementById('answer-text')",
    );
    browser
        .eval(&format!(
            "window.__states = []; const snap = () => {{ \
               const s = JSON.stringify({NODE_STATES}); \
               if (window.__states[window.__states.length - 1] !== s) window.__states.push(s); }}; \
             snap(); new MutationObserver(snap).observe(document.body, \
               {{childList: true, subtree: true, attributes: true}}); true"
        ))
        .unwrap();
    browser
        .type_into("#answer-text", "1-2-user-authentication")
        .unwrap();
    browser.click("#answer-submit").unwrap();
    // Mid-run (or later on a busy machine: a state the page may pass through between two of
    // its refreshes is never waited for): the run has reached the third node.
    wait(
        &mut browser,
        "the run to reach the third node",
        &format!("{NODE_STATES}[2][1] !== 'pending'"),
    );
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("live-model-running.png"))
        .unwrap();
    wait(
        &mut browser,
        "the run to complete",
        &format!(
            "document.getElementById('run-phase').dataset.phase === 'completed' && \
             {NODE_STATES}.every(([_, s]) => s === 'completed')"
        ),
    );
    let seen: Vec<String> =
        serde_json::from_value(browser.eval("window.__states").unwrap()).unwrap();
    let seen: Vec<Vec<(String, String)>> = seen
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
    eprintln!("graph states seen after the answer ({}):", seen.len());
    for states in &seen {
        let line: Vec<&str> = states
            .iter()
            .map(|(_, s)| match s.as_str() {
                "completed" => "✓",
                "current" => "▸",
                _ => "·",
            })
            .collect();
        eprintln!("  {}", line.join(" "));
    }
    // Nodes turn completed in order and never go back; at most one is current.
    let done =
        |states: &Vec<(String, String)>| states.iter().filter(|(_, s)| s == "completed").count();
    for pair in seen.windows(2) {
        assert!(done(&pair[0]) <= done(&pair[1]), "{seen:?}");
    }
    for states in &seen {
        let n = done(states);
        assert!(
            states[..n].iter().all(|(_, s)| s == "completed"),
            "completed nodes come first: {states:?}"
        );
        assert!(
            states.iter().filter(|(_, s)| s == "current").count() <= 1,
            "{states:?}"
        );
    }
    // Before the answer, completed, and at least one step in between (the model's answers
    // are 400 ms apart, the page refreshes within ~250 ms of each audit line; how many
    // steps a loaded machine shows varies, so only one in-between step is required).
    let steps_seen: std::collections::BTreeSet<usize> = seen.iter().map(done).collect();
    assert!(
        steps_seen.len() >= 3,
        "the graph was seen at several steps of the run, not only before and after: {steps_seen:?}"
    );
    assert_eq!(model.remaining(), 0, "every recorded answer was asked for");
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("live-model-completed.png"))
        .unwrap();
}

/// The answers the model got for widgets (the user messages carrying `WIDGET_SUBMIT`), in
/// the order they were first sent.
fn widget_submissions(received: &[baton_llm::testing::Received]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for request in received {
        for m in request.body["messages"].as_array().into_iter().flatten() {
            let content = m["content"].as_str().unwrap_or_default();
            if m["role"] == "user"
                && content.contains("WIDGET_SUBMIT")
                && !found.iter().any(|f| f == content)
            {
                found.push(content.to_string());
            }
        }
    }
    found
}

/// The widgets' script in a real browser: a model asks with `ui.ask_user` for a selection,
/// then a confirmation, then a form; each is drawn as its widget, filled in and sent from
/// the page, and what the person chose reaches the model as the tool's result.
#[test]
fn widget_questions_are_answered_in_the_page_and_reach_the_model() {
    let Some(chromium) = chromium_or_skip("serve_browser_widgets") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let selection = serde_json::json!({"widgetId": "format", "type": "selection",
        "message": "Which format?", "options": [
            {"value": "md", "label": "Markdown"}, {"value": "html", "label": "HTML"}]})
    .to_string();
    let confirmation = serde_json::json!({"widgetId": "go", "type": "confirmation",
        "message": "Write the story now?"})
    .to_string();
    let form = serde_json::json!({"widgetId": "story", "type": "form", "message": "Story details",
        "schema": {"properties": {
            "title": {"type": "string", "title": "Title"},
            "points": {"type": "integer"},
            "urgent": {"type": "boolean"},
            "size": {"enum": ["S", "M", "L"]}},
          "required": ["title"]}})
    .to_string();
    let replies = vec![
        Reply::tool_calls(&[("w1", "ui_ask_user", &selection)]),
        Reply::tool_calls(&[("w2", "ui_ask_user", &confirmation)]),
        Reply::tool_calls(&[("w3", "ui_ask_user", &form)]),
        Reply::text("Thanks. Which story comes next?"),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let model = runtime.block_on(ScriptedServer::start(replies)).unwrap();
    let serve = start_serve_with(
        home.path(),
        tmp.path(),
        &[
            ("OPENAI_BASE_URL", model.base_url()),
            ("BATON_MODEL", "scripted".to_string()),
            ("OPENAI_API_KEY", "sk-test".to_string()),
        ],
    );
    let mut browser = Browser::launch(&chromium).unwrap();
    browser.navigate(&serve.url).unwrap();
    browser.click("#start-link").unwrap();
    wait(
        &mut browser,
        "the start form",
        "!!document.getElementById('start-form')",
    );
    let package = baton_testkit::example("create-story-micro");
    browser
        .type_into("#start-package", package.to_str().unwrap())
        .unwrap();
    browser
        .type_into("#start-project", project.to_str().unwrap())
        .unwrap();
    browser.click("#start-submit").unwrap();

    let widget = |kind: &str| {
        format!(
            "(f => !!f && f.dataset.widgetType === '{kind}' && !f.dataset.answered && \
               !f.querySelector('button:disabled'))(document.getElementById('answer-form'))"
        )
    };
    wait(&mut browser, "the selection", &widget("selection"));
    let message = browser
        .eval("document.getElementById('question-text').textContent")
        .unwrap();
    assert_eq!(message, "Which format?");
    browser.click("#choice-1").unwrap();
    browser.click("#answer-submit").unwrap();

    wait(&mut browser, "the confirmation", &widget("confirmation"));
    browser.click("#answer-confirm").unwrap();

    wait(&mut browser, "the form", &widget("form"));
    browser.type_into("#field-0", "Board view").unwrap();
    browser.type_into("#field-1", "3").unwrap();
    browser.click("#field-2").unwrap();
    browser
        .eval(
            "(s => { s.value = s.options[1].value; \
               s.dispatchEvent(new Event('change', {bubbles: true})); return true; }) \
             (document.getElementById('field-3'))",
        )
        .unwrap();
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .save_screenshot(&shots().join("widget-form.png"))
        .unwrap();
    browser.click("#answer-submit").unwrap();

    wait(
        &mut browser,
        "the plain question after the widgets",
        "(f => !!f && f.dataset.widgetType === 'text')(document.getElementById('answer-form')) && \
         document.getElementById('question-text').textContent.includes('Which story comes next?')",
    );
    let submitted = widget_submissions(&model.received());
    eprintln!("widget answers the model got:");
    for s in &submitted {
        eprintln!("  {s:?}");
    }
    assert_eq!(submitted.len(), 3, "{submitted:#?}");
    let value = |text: &str| -> Value {
        let json = text.split_once("WIDGET_SUBMIT\n").map_or("", |(_, j)| j);
        let json = json.lines().next().unwrap_or_default();
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    assert_eq!(value(&submitted[0])["type"], "selection");
    assert_eq!(value(&submitted[0])["value"], serde_json::json!(["html"]));
    assert_eq!(value(&submitted[1])["type"], "confirmation");
    assert_eq!(value(&submitted[1])["value"]["confirmed"], true);
    assert_eq!(value(&submitted[2])["type"], "form");
    assert_eq!(
        value(&submitted[2])["value"],
        serde_json::json!({"title": "Board view", "points": 3, "urgent": true, "size": "M"})
    );
    let log = browser.log_text();
    assert!(!log.contains("exception:"), "{log}");
    assert!(!log.contains("Content Security Policy"), "{log}");
}
