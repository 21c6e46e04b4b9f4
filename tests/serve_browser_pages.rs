//! The pages of `baton serve` after a newcomer's first demos, in headless Chromium over CDP
//! (baton_testkit::cdp) against the real `baton serve` binary on 127.0.0.1.
//!
//! One store gets the three offline demos (`baton demo`, `baton demo epic`, `baton demo
//! session`), made once per test binary; each test starts its own server and browser on it.
//! What a person must find there:
//! - the epic board and the sessions page open on the projects the store knows, newest first
//!   (never an empty "Choose a project"); the epic board offers only those with a sprint;
//! - story cards link to their phase runs, session steps to their task runs;
//! - the runs list groups phase and task runs under their story or step, and filters on them;
//! - the conversation shows baton's own instructions folded and labelled as baton's;
//! - graph node titles whole when there is room;
//! - "Live." only while a process holds the run's driver lock;
//! - no overlapping columns at 1280 and 800 px;
//! - a replayed run shows the tokens its trace recorded.
//!
//! Every wait is on a condition in the page, never a fixed sleep. Screenshots go to
//! `target/tmp/serve_browser_pages/`. Skips (saying so) without Chromium unless
//! BATON_REQUIRE_BROWSER is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::cdp::{Browser, chromium_or_skip, js_string};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

/// Long enough for a loaded 2-core machine; a passing wait takes well under a second.
const STEP: Duration = Duration::from_secs(30);

/// The store the demos filled, shared by the tests of this binary.
struct Demos {
    home: PathBuf,
    /// The create-story demo's run (`baton demo`).
    story_run: String,
    epic_project: PathBuf,
    session_project: PathBuf,
    session_id: String,
}

fn baton(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .env("BATON_HOME", home)
        .env_remove("OPENAI_API_KEY")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null());
    command
}

fn run_json(command: &mut Command) -> Value {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        command,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// This binary's directory; those of test processes no longer alive are removed.
fn scratch() -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_browser_pages");
    if let Ok(entries) = fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.parse::<u32>().is_ok() && !Path::new("/proc").join(&name).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(std::process::id().to_string());
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn demos() -> &'static Demos {
    static DEMOS: OnceLock<Demos> = OnceLock::new();
    DEMOS.get_or_init(|| {
        let dir = scratch();
        let home = dir.join("home");
        let story = run_json(
            baton(&home)
                .args(["demo", "--json", "--dir"])
                .arg(dir.join("story")),
        );
        fs::create_dir_all(dir.join("epic")).unwrap();
        let epic = run_json(
            baton(&home)
                .args(["demo", "epic", "--json"])
                .current_dir(dir.join("epic")),
        );
        assert_eq!(epic["outcome"], "done", "{epic}");
        // The session last: it is the newest project.
        let session_project = dir.join("session");
        let session = run_json(
            baton(&home)
                .args(["demo", "session", "--json", "--dir"])
                .arg(&session_project),
        );
        Demos {
            home,
            story_run: story["runId"].as_str().unwrap().to_string(),
            epic_project: fs::canonicalize(dir.join("epic/baton-demo-epic")).unwrap(),
            session_project: fs::canonicalize(&session_project).unwrap(),
            session_id: session["session_id"].as_str().unwrap().to_string(),
        }
    })
}

/// The running `baton serve`, killed when dropped.
struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT`
    base: String,
    token: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn start(home: &Path) -> Serve {
        let mut child = baton(home)
            .args(["serve", "--port", "0", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
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
        let printed: Value = serde_json::from_str(&line).unwrap();
        Serve {
            child,
            base: format!("http://127.0.0.1:{}", printed["port"]),
            token: printed["token"].as_str().unwrap().to_string(),
        }
    }

    /// Opens `path` with the token (the first load sets the cookie).
    fn open(&self, browser: &mut Browser, path: &str) {
        let sep = if path.contains('?') { '&' } else { '?' };
        browser
            .navigate(&format!("{}{path}{sep}token={}", self.base, self.token))
            .unwrap();
    }
}

fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_browser_pages");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits until `condition` holds on a fully loaded page.
fn wait(browser: &mut Browser, what: &str, condition: &str) -> Value {
    let condition = format!("document.readyState === 'complete' && ({condition})");
    match browser.wait_for(&condition, STEP) {
        Ok(value) => value,
        Err(e) => {
            let shot = shots().join(format!("failure-{}.png", std::process::id()));
            let _ = browser.save_screenshot(&shot);
            panic!("waiting for {what}: {e}\n(screenshot: {})", shot.display())
        }
    }
}

fn browser() -> Option<Browser> {
    let chromium = chromium_or_skip("serve_browser_pages")?;
    Some(Browser::launch(&chromium).unwrap())
}

fn strings(value: Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The epic demo's phase runs per story, from baton's progress record.
fn phase_runs(project: &Path) -> BTreeMap<String, Vec<Value>> {
    let progress: Value = serde_json::from_slice(
        &fs::read(project.join("_bmad-output/implementation-artifacts/.baton-epic-progress.json"))
            .unwrap(),
    )
    .unwrap();
    let mut by_story: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in progress["runs"].as_array().unwrap() {
        by_story
            .entry(r["storyKey"].as_str().unwrap().to_string())
            .or_default()
            .push(r.clone());
    }
    by_story
}

#[test]
fn the_epic_board_and_sessions_open_on_the_known_projects_newest_first() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    serve.open(&mut browser, "/");
    wait(
        &mut browser,
        "the runs page",
        "!!document.getElementById('nav-epic')",
    );
    browser.click("#nav-epic").unwrap();
    wait(
        &mut browser,
        "the epic demo's board, opened without choosing",
        "location.pathname === '/epic' && !!document.getElementById('epic-summary')",
    );
    let opened = browser
        .eval("document.getElementById('project-input').value")
        .unwrap();
    assert_eq!(opened, json!(d.epic_project.display().to_string()));
    // Only the projects with a sprint status (the others have no board): the epic's.
    let listed = strings(
        browser
            .eval("Array.from(document.querySelectorAll('#project-list a')).map(a => a.dataset.project)")
            .unwrap(),
    );
    assert_eq!(listed, [d.epic_project.display().to_string()]);
    let current = browser
        .eval("document.querySelector('#project-list a[aria-current]').dataset.project")
        .unwrap();
    assert_eq!(current, json!(d.epic_project.display().to_string()));
    browser
        .save_screenshot(&shots().join("epic-board.png"))
        .unwrap();

    browser.click("#nav-sessions").unwrap();
    let row = format!("tr[data-session-id={}]", js_string(&d.session_id));
    wait(
        &mut browser,
        "the demo session listed without choosing",
        &format!(
            "location.pathname === '/sessions' && !!document.querySelector({})",
            js_string(&row)
        ),
    );
    let opened = browser
        .eval("document.getElementById('project-input').value")
        .unwrap();
    assert_eq!(opened, json!(d.session_project.display().to_string()));
    // Every known project, newest first: the session's, the epic's, the story demo's.
    let listed = strings(
        browser
            .eval("Array.from(document.querySelectorAll('#project-list a')).map(a => a.dataset.project)")
            .unwrap(),
    );
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[0], d.session_project.display().to_string());
    assert_eq!(listed[1], d.epic_project.display().to_string());
}

#[test]
fn story_cards_and_session_steps_link_to_their_runs() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    let expected = phase_runs(&d.epic_project);
    assert_eq!(expected.values().map(Vec::len).sum::<usize>(), 13);
    serve.open(
        &mut browser,
        &format!(
            "/epic?project={}",
            url(&d.epic_project.display().to_string())
        ),
    );
    wait(
        &mut browser,
        "the board",
        "!!document.getElementById('epic-summary')",
    );
    for (story, runs) in &expected {
        let links = browser
            .eval(&format!(
                "Array.from(document.querySelectorAll('.story[data-story=\"{story}\"] a[data-testid=story-run]')).map(a => [a.dataset.phase, a.getAttribute('href')])"
            ))
            .unwrap();
        let want: Vec<Value> = runs
            .iter()
            .map(|r| {
                json!([
                    r["phase"],
                    format!("/runs/{}", r["runId"].as_str().unwrap())
                ])
            })
            .collect();
        assert_eq!(links, Value::Array(want), "story {story}");
    }
    // A link leads to that run's page.
    let first = &expected["2-1-create-board"][0];
    let id = first["runId"].as_str().unwrap();
    browser
        .click(&format!(
            ".story[data-story=\"2-1-create-board\"] a[data-run-id=\"{id}\"]"
        ))
        .unwrap();
    wait(
        &mut browser,
        "the phase run's page",
        &format!(
            "document.getElementById('run') && document.getElementById('run').dataset.runId === '{id}'"
        ),
    );

    // The session's steps: every step that ran links its task run, whose task names it.
    serve.open(
        &mut browser,
        &format!(
            "/sessions/{}?project={}",
            d.session_id,
            url(&d.session_project.display().to_string())
        ),
    );
    wait(
        &mut browser,
        "the session",
        "!!document.getElementById('steps')",
    );
    let steps = browser
        .eval(
            "Array.from(document.querySelectorAll('#steps > li')).map(li => [li.dataset.index, li.dataset.status, \
             Array.from(li.querySelectorAll('a[data-testid=step-run]')).map(a => a.dataset.runId)])",
        )
        .unwrap();
    let steps = steps.as_array().unwrap();
    let linked: Vec<&Value> = steps
        .iter()
        .filter(|s| !s[2].as_array().unwrap().is_empty())
        .collect();
    assert!(linked.len() >= 3, "{steps:?}");
    let index = linked[0][0].as_str().unwrap().to_string();
    let run = linked[0][2][0].as_str().unwrap().to_string();
    browser
        .click(&format!(
            "#steps > li[data-index=\"{index}\"] a[data-run-id=\"{run}\"]"
        ))
        .unwrap();
    wait(
        &mut browser,
        "the step's task run",
        &format!(
            "document.getElementById('run') && document.getElementById('run').dataset.runId === '{run}'"
        ),
    );
    let task = browser
        .eval("Array.from(document.querySelectorAll('#run-facts dt')).find(dt => dt.textContent === 'Task').nextElementSibling.textContent")
        .unwrap();
    let task = task.as_str().unwrap();
    assert!(
        task.starts_with(&format!("{}/step-{index}-", d.session_id)),
        "{task}"
    );
}

#[test]
fn the_runs_list_groups_phase_and_task_runs_and_filters_them() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    let expected = phase_runs(&d.epic_project);
    serve.open(&mut browser, "/");
    wait(
        &mut browser,
        "the runs list",
        "!!document.getElementById('runs-table')",
    );
    browser
        .save_screenshot(&shots().join("runs-grouped.png"))
        .unwrap();
    // One group per story, holding exactly its phase runs.
    let groups = browser
        .eval(
            "Array.from(document.querySelectorAll('tbody.group')).map(g => [g.dataset.part, \
             g.querySelector('.group-head a').textContent, \
             Array.from(g.querySelectorAll('tr[data-run-id]')).map(tr => tr.dataset.runId)])",
        )
        .unwrap();
    let groups = groups.as_array().unwrap();
    for (story, runs) in &expected {
        let group = groups
            .iter()
            .find(|g| g[0] == "epic" && g[1] == story.as_str())
            .unwrap_or_else(|| panic!("no group for {story}: {groups:?}"));
        let mut ids = strings(group[2].clone());
        ids.sort();
        let mut want: Vec<String> = runs
            .iter()
            .map(|r| r["runId"].as_str().unwrap().to_string())
            .collect();
        want.sort();
        assert_eq!(ids, want, "story {story}");
    }
    let session_groups: Vec<&Value> = groups.iter().filter(|g| g[0] == "session").collect();
    assert!(session_groups.len() >= 3, "{groups:?}");
    assert!(
        session_groups.iter().all(|g| g[1] == d.session_id.as_str()),
        "{groups:?}"
    );
    // The create-story demo's run belongs to neither: a row of its own.
    let alone = browser
        .eval(&format!(
            "!!document.querySelector('tbody:not(.group) tr[data-run-id=\"{}\"]')",
            d.story_run
        ))
        .unwrap();
    assert_eq!(alone, json!(true));

    // Filter: session steps only.
    browser
        .eval("document.getElementById('filter-part').value = 'session'; true")
        .unwrap();
    browser.click("#filter-apply").unwrap();
    wait(
        &mut browser,
        "the session runs only",
        "location.search.includes('part=session') && !!document.getElementById('runs-table')",
    );
    let parts = strings(
        browser
            .eval("Array.from(document.querySelectorAll('#runs-table tbody')).map(b => b.dataset.part || 'none')")
            .unwrap(),
    );
    assert!(!parts.is_empty());
    assert!(parts.iter().all(|p| p == "session"), "{parts:?}");

    // "only these" on a story: its runs and nothing else.
    serve.open(&mut browser, "/?group=2-2-move-task");
    wait(
        &mut browser,
        "one story's runs",
        "!!document.getElementById('runs-table')",
    );
    let mut ids = strings(
        browser
            .eval("Array.from(document.querySelectorAll('tr[data-run-id]')).map(tr => tr.dataset.runId)")
            .unwrap(),
    );
    ids.sort();
    let mut want: Vec<String> = expected["2-2-move-task"]
        .iter()
        .map(|r| r["runId"].as_str().unwrap().to_string())
        .collect();
    want.sort();
    assert_eq!(ids, want);
}

#[test]
fn baton_instructions_are_folded_and_labelled_as_baton() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    serve.open(&mut browser, &format!("/runs/{}", d.story_run));
    wait(
        &mut browser,
        "the conversation",
        "!!document.getElementById('conversation')",
    );
    let seen = browser
        .eval(
            "(() => { const c = document.getElementById('conversation'); return { \
               baton: Array.from(c.querySelectorAll('details.msg.baton')).map(d => [d.open, d.querySelector('summary').textContent]), \
               users: Array.from(c.querySelectorAll('.msg.user')).map(m => m.textContent) }; })()",
        )
        .unwrap();
    browser
        .eval("document.getElementById('conversation-card').scrollIntoView(); true")
        .unwrap();
    browser
        .save_screenshot(&shots().join("conversation.png"))
        .unwrap();
    let baton = seen["baton"].as_array().unwrap();
    let summaries: Vec<&str> = baton.iter().map(|b| b[1].as_str().unwrap()).collect();
    assert!(
        summaries
            .iter()
            .any(|s| s.starts_with("baton RUN_DIRECTIVE")),
        "{summaries:?}"
    );
    assert!(
        summaries.iter().any(|s| s.starts_with("baton NODE_BRIEF")),
        "{summaries:?}"
    );
    assert!(
        baton.iter().all(|b| b[0] == json!(false)),
        "folded: {baton:?}"
    );
    for text in seen["users"].as_array().unwrap() {
        let text = text.as_str().unwrap();
        for marker in ["RUN_DIRECTIVE", "NODE_BRIEF", "Reminder:", "USER_INPUT"] {
            assert!(
                !text.contains(marker),
                "a person's message shows {marker}: {text}"
            );
        }
    }
}

#[test]
fn graph_node_titles_are_whole_when_there_is_room() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    serve.open(&mut browser, &format!("/runs/{}", d.story_run));
    wait(
        &mut browser,
        "the graph",
        "!!document.getElementById('graph-svg')",
    );
    // Each node: the title it shows, its full title (its tooltip: "id — title (status)"),
    // and whether the text's box fits in the node's box.
    let nodes = browser
        .eval(
            "Array.from(document.querySelectorAll('#graph-svg g.node')).map(g => { \
               const t = g.querySelector('text.title').getBBox(); const r = g.querySelector('rect').getBBox(); \
               const tip = g.querySelector('title').textContent; \
               return [g.querySelector('text.title').textContent, tip.slice(tip.indexOf(' — ') + 3, tip.lastIndexOf(' (')), \
                       t.x >= r.x && t.x + t.width <= r.x + r.width]; })",
        )
        .unwrap();
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.len(), 6, "{nodes:?}");
    assert!(
        nodes
            .iter()
            .any(|n| n[1].as_str().unwrap().chars().count() > 22),
        "a title longer than the old cut: {nodes:?}"
    );
    for n in nodes {
        assert_eq!(n[0], n[1], "the title is cut: {nodes:?}");
        assert_eq!(n[2], json!(true), "the title leaves its node: {nodes:?}");
    }
    // The drawing is not shrunk to unreadable: shown at least 90% of its size.
    let scale = browser
        .eval("(() => { const s = document.getElementById('graph-svg'); return s.getBoundingClientRect().width / s.viewBox.baseVal.width; })()")
        .unwrap();
    assert!(scale.as_f64().unwrap() >= 0.9, "scale {scale}");
}

#[test]
fn live_only_while_a_process_drives_the_run() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    let status = "document.getElementById('timeline-status')";
    serve.open(&mut browser, &format!("/runs/{}", d.story_run));
    // The stream opened and said whether a process drives the run.
    let text = wait(
        &mut browser,
        "the timeline's status",
        &format!("{status}.dataset.driven && {status}.textContent"),
    );
    assert_ne!(text, json!("Live."), "a completed run nobody drives");
    // A process takes the run's driver lock (as `baton resume` does): the page says Live.
    let store = baton_store::Store::new(&d.home);
    let (project, run) = store.find_run(&d.story_run).unwrap();
    let lock = baton_store::driver_lock::acquire(
        &project.run_paths(&run.run_id).dir,
        &run.run_id,
        "baton resume",
    )
    .unwrap();
    wait(
        &mut browser,
        "Live. while the lock is held",
        &format!("{status}.textContent === 'Live.' && {status}.dataset.driven === 'true'"),
    );
    // A page opened now says it from the start, too.
    serve.open(&mut browser, &format!("/runs/{}", d.story_run));
    wait(
        &mut browser,
        "Live. on a fresh page",
        &format!(
            "document.getElementById('run').dataset.driven === 'true' && {status}.textContent === 'Live.'"
        ),
    );
    drop(lock);
    wait(
        &mut browser,
        "not Live. once the driver is gone",
        &format!("{status}.dataset.driven === 'false' && {status}.textContent !== 'Live.'"),
    );
}

/// Boxes that overlap where they should sit side by side: the children of every grid and flex
/// row of the page (cards, columns, table cells, facts, timeline fields), and a child that
/// sticks out of a container that does not scroll. Returns what overlaps, as text.
const OVERLAPS: &str = r#"(() => {
  const found = [];
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '');
  const visible = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const scrolls = (e) => { const s = getComputedStyle(e); return /(auto|scroll|hidden)/.test(s.overflowX); };
  for (const parent of document.querySelectorAll('main *')) {
    const d = getComputedStyle(parent).display;
    if (!/grid|flex|table-row/.test(d)) continue;
    if (parent.closest('svg')) continue;
    const kids = Array.from(parent.children).filter(visible);
    for (let i = 0; i < kids.length; i++) {
      const a = kids[i].getBoundingClientRect();
      for (let j = i + 1; j < kids.length; j++) {
        const b = kids[j].getBoundingClientRect();
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) found.push(name(kids[i]) + ' overlaps ' + name(kids[j]) + ' in ' + name(parent));
      }
    }
  }
  // Text wider than its box, spilling over its neighbours (a box that scrolls or clips keeps it).
  for (const e of document.querySelectorAll('main td, main th, main dd, main dt, main .column, main .card, main .story, main .timeline li > span, main .steps li > span')) {
    if (!visible(e) || scrolls(e)) continue;
    if (e.scrollWidth > e.clientWidth + 1) found.push(name(e) + ' spills (' + e.scrollWidth + ' > ' + e.clientWidth + ')');
  }
  // Nothing wider than the window (a page that scrolls sideways).
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    found.push('the page is wider than the window (' + document.documentElement.scrollWidth + ' > ' + window.innerWidth + ')');
  return found;
})()"#;

#[test]
fn no_columns_overlap_at_1280_and_800_pixels() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    let store = baton_store::Store::new(&d.home);
    let phase_run = phase_runs(&d.epic_project)["2-2-move-task"][0]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, task_run) = store
        .runs(None)
        .unwrap()
        .rows
        .into_iter()
        .find(|(_, r)| r.kind == baton_store::RunKind::Task)
        .unwrap();
    let epic = url(&d.epic_project.display().to_string());
    let session = url(&d.session_project.display().to_string());
    let pages = [
        ("runs", "/".to_string(), "runs-table"),
        ("run", format!("/runs/{}", d.story_run), "graph-svg"),
        ("phase-run", format!("/runs/{phase_run}"), "graph-svg"),
        (
            "task-run",
            format!("/runs/{}", task_run.run_id),
            "run-facts",
        ),
        ("epic", format!("/epic?project={epic}"), "epic-summary"),
        (
            "sessions",
            format!("/sessions?project={session}"),
            "sessions-table",
        ),
        (
            "session",
            format!("/sessions/{}?project={session}", d.session_id),
            "steps",
        ),
        ("start", "/start".to_string(), "start-form"),
    ];
    let mut problems = Vec::new();
    for width in [1280u32, 800] {
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
            )
            .unwrap();
        for (name, path, marker) in &pages {
            serve.open(&mut browser, path);
            wait(
                &mut browser,
                &format!("{name} at {width} px"),
                &format!("!!document.getElementById('{marker}') && window.innerWidth === {width}"),
            );
            // The timeline and usage of a run page fill in from the stream: wait for it.
            if path.starts_with("/runs/") {
                wait(
                    &mut browser,
                    "the stream's first lines",
                    "document.getElementById('timeline').children.length > 0",
                );
            }
            browser
                .save_screenshot(&shots().join(format!("{name}-{width}.png")))
                .unwrap();
            let found = strings(browser.eval(OVERLAPS).unwrap());
            problems.extend(
                found
                    .into_iter()
                    .map(|f| format!("{name} at {width} px: {f}")),
            );
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_replayed_run_shows_the_tokens_its_trace_recorded() {
    let Some(mut browser) = browser() else { return };
    let d = demos();
    let serve = Serve::start(&d.home);
    // A phase run of the epic demo, replayed from its recorded trace, which has usage.
    let runs = phase_runs(&d.epic_project);
    let record = &runs["2-1-create-board"][0];
    let trace_name = format!(
        "2-1-create-board.{}.{}.trace.json",
        record["phase"].as_str().unwrap(),
        record["n"]
    );
    let trace: Value = serde_json::from_slice(
        &fs::read(
            baton_testkit::repo()
                .join("examples/traces/epic-demo")
                .join(&trace_name),
        )
        .unwrap(),
    )
    .unwrap();
    let mut want = [0u64; 4];
    for dialogue in trace["dialogues"].as_array().unwrap() {
        if dialogue["type"] == "user_input" {
            continue;
        }
        want[0] += 1;
        let Some(usage) = dialogue.pointer("/response/usage") else {
            continue;
        };
        want[1] += usage["promptTokens"].as_u64().unwrap();
        want[2] += usage["completionTokens"].as_u64().unwrap();
        want[3] += usage["totalTokens"].as_u64().unwrap();
    }
    assert!(want[3] > 0, "{trace_name} records usage");
    serve.open(
        &mut browser,
        &format!("/runs/{}", record["runId"].as_str().unwrap()),
    );
    let shown = wait(
        &mut browser,
        "the usage the stream summed",
        &format!(
            "(() => {{ const v = ['turns', 'prompt', 'completion', 'total'].map(k => Number(document.getElementById('usage-' + k).textContent.replace(/[^0-9]/g, ''))); \
               return v[0] === {} && v; }})()",
            want[0]
        ),
    );
    assert_eq!(shown, json!(want), "{trace_name}");
}

fn url(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
