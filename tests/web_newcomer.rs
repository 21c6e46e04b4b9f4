//! The pages of `baton serve` a newcomer reads in the second hour, in headless Chromium over
//! CDP (baton_testkit::cdp) against the real `baton serve` binary on 127.0.0.1:
//! - runs of the project's own BMAD skills (task runs of an epic phase) sit under their story;
//! - `/epic` opens on the project `baton serve` was started in, and the picker lists only
//!   projects with a sprint status; one without opens to a calm page that says what makes one;
//! - failed run and epic pages say what to do next, in the CLI's words;
//! - a story that never reached review shows no review cycle;
//! - the Queue page without `--db` says how to connect one, with no error box;
//! - tool results show their text as text, the JSON folded;
//! - a completed session's position is `done`, as `baton session status` says.
//!
//! One store is filled once per test binary (a paused epic, the three demos, a failed run, a
//! BMAD-skill phase run); each test starts its own server and browser. Every wait is on a
//! condition in the page, never a fixed sleep. Screenshots go to `target/tmp/web_newcomer/`.
//! Skips (saying so) without Chromium unless BATON_REQUIRE_BROWSER is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::player;

use baton_testkit::cdp::{Browser, chromium_or_skip, js_string};
use player::{Player, Scenario};
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

/// Long enough for a loaded 2-core machine; a passing wait takes well under a second.
const STEP: Duration = Duration::from_secs(30);
const IMPL: &str = "_bmad-output/implementation-artifacts";

struct Fixture {
    home: PathBuf,
    /// An epic paused on a failed create-story of 2-1-create-board.
    paused: PathBuf,
    /// `baton demo epic`'s project, with a BMAD-skill phase run added to 2-2-move-task.
    epic: PathBuf,
    skill_run: String,
    /// `baton demo`'s project: no sprint status.
    story: PathBuf,
    story_run: String,
    /// A run that failed: its model was never reached.
    failed_run: String,
    session: PathBuf,
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

fn output(command: &mut Command) -> (i32, Value, String) {
    let out = command.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_json(command: &mut Command) -> Value {
    let (code, json, stderr) = output(command);
    assert_eq!(code, 0, "{command:?}: {stderr}");
    json
}

/// This binary's directory; those of test processes no longer alive are removed.
fn scratch() -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_newcomer");
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

/// An epic run whose create-story of 2-1-create-board fails: the loop pauses on it.
fn paused_epic(home: &Path, dir: &Path) -> PathBuf {
    let project = dir.join("paused");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/taskboard-epic"),
        &project,
    );
    let player = Player::start(
        &project,
        Scenario {
            failures: vec![("2-1-create-board".into(), "create-story".into(), 2)],
            ..Default::default()
        },
    );
    let (code, json, stderr) = output(
        baton(home)
            .args(["epic", "run", "epic-2", "--json", "-p"])
            .arg(&project)
            .env("OPENAI_BASE_URL", player.base_url())
            .env("BATON_MODEL", "played")
            .env("OPENAI_API_KEY", "sk-test"),
    );
    assert_eq!(code, 1, "{json}\n{stderr}");
    assert_eq!(json["outcome"], "paused", "{json}");
    fs::canonicalize(project).unwrap()
}

/// A phase run of the project's own BMAD skill, as the autopilot makes one: a task run named
/// `<epic>/<story>/<phase>.<n>`, recorded in the epic's progress file like any phase run.
fn skill_run(home: &Path, project: &Path) -> String {
    let store = baton_store::Store::new(home);
    let p = store.project(project).unwrap();
    let task = baton_engine::task_run::create_task(
        &p,
        baton_store::NewTaskRun {
            task_ref: "epic-2/2-2-move-task/dev.2",
            agent_id: "bmad-dev-story",
        },
        "Run the installed bmad-dev-story skill for 2-2-move-task.",
    )
    .unwrap();
    let id = task.run().run_id.clone();
    drop(task);
    let path = project.join(IMPL).join(".baton-epic-progress.json");
    let mut progress: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let runs = progress["runs"].as_array_mut().unwrap();
    let mut record = runs
        .iter()
        .find(|r| r["storyKey"] == "2-2-move-task" && r["phase"] == "dev")
        .unwrap()
        .clone();
    record["runId"] = json!(id);
    record["n"] = json!(2);
    record["method"] = json!("bmad-dev-story");
    runs.push(record);
    fs::write(&path, serde_json::to_vec_pretty(&progress).unwrap()).unwrap();
    id
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = scratch();
        let home = dir.join("home");
        let paused = paused_epic(&home, &dir);
        let story_dir = dir.join("story");
        let story = run_json(
            baton(&home)
                .args(["demo", "--json", "--dir"])
                .arg(&story_dir),
        );
        // A port nothing listens on: the run fails without reaching its model.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (code, failed, stderr) = output(
            baton(&home)
                .arg("run")
                .arg(baton_testkit::repo().join("examples/packages/create-story-micro"))
                .arg("--project")
                .arg(&story_dir)
                .args(["--non-interactive", "--json", "--model", "m", "--base-url"])
                .arg(format!("http://127.0.0.1:{port}/v1"))
                .env("OPENAI_API_KEY", "sk-test"),
        );
        assert_eq!(code, 1, "{failed}\n{stderr}");
        fs::create_dir_all(dir.join("epic")).unwrap();
        let epic_demo = run_json(
            baton(&home)
                .args(["demo", "epic", "--json"])
                .current_dir(dir.join("epic")),
        );
        assert_eq!(epic_demo["outcome"], "done", "{epic_demo}");
        let epic = fs::canonicalize(dir.join("epic/baton-demo-epic")).unwrap();
        let skill_run = skill_run(&home, &epic);
        let session = dir.join("session");
        let demo_session = run_json(
            baton(&home)
                .args(["demo", "session", "--json", "--dir"])
                .arg(&session),
        );
        Fixture {
            home,
            paused,
            epic,
            skill_run,
            story: fs::canonicalize(&story_dir).unwrap(),
            story_run: story["runId"].as_str().unwrap().to_string(),
            failed_run: failed["runId"].as_str().unwrap().to_string(),
            session: fs::canonicalize(&session).unwrap(),
            session_id: demo_session["session_id"].as_str().unwrap().to_string(),
        }
    })
}

/// The running `baton serve`, killed when dropped.
struct Serve {
    child: Child,
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
    /// `baton serve` started in `dir`, as a person starts it in their project.
    fn start_in(home: &Path, dir: &Path) -> Serve {
        let mut child = baton(home)
            .args(["serve", "--port", "0", "--json"])
            .current_dir(dir)
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

    fn open(&self, browser: &mut Browser, path: &str) {
        let sep = if path.contains('?') { '&' } else { '?' };
        browser
            .navigate(&format!("{}{path}{sep}token={}", self.base, self.token))
            .unwrap();
    }
}

fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_newcomer");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits until `condition` holds on a fully loaded page; returns its value.
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
    let chromium = chromium_or_skip("web_newcomer")?;
    Some(Browser::launch(&chromium).unwrap())
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

fn shown(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_bmad_skill_run_sits_under_its_story() {
    let Some(mut browser) = browser() else { return };
    let f = fixture();
    let serve = Serve::start_in(&f.home, &f.epic);
    serve.open(&mut browser, "/");
    let row = format!("tr[data-run-id={}]", js_string(&f.skill_run));
    let group = wait(
        &mut browser,
        "the skill run's row",
        &format!(
            "(() => {{ const tr = document.querySelector({}); if (!tr) return false; \
               const g = tr.closest('tbody'); return [g.classList.contains('group'), g.dataset.part || '', \
               g.querySelector('.group-head a') ? g.querySelector('.group-head a').textContent : '']; }})()",
            js_string(&row)
        ),
    );
    assert_eq!(group, json!([true, "epic", "2-2-move-task"]));
}

#[test]
fn the_epic_board_opens_on_the_start_project_and_says_what_to_do_next() {
    let Some(mut browser) = browser() else { return };
    let f = fixture();
    // Started in a subfolder of the paused project: that project, not the newest one.
    let sub = f.paused.join(IMPL);
    let serve = Serve::start_in(&f.home, &sub);
    serve.open(&mut browser, "/epic");
    wait(
        &mut browser,
        "the board",
        "!!document.getElementById('epic-summary')",
    );
    let opened = browser
        .eval("document.getElementById('project-input').value")
        .unwrap();
    assert_eq!(opened, json!(shown(&f.paused)));
    // Only projects with a sprint status: the paused epic and the epic demo.
    let listed = browser
        .eval("Array.from(document.querySelectorAll('#project-list a')).map(a => a.dataset.project).sort()")
        .unwrap();
    let mut want = vec![shown(&f.paused), shown(&f.epic)];
    want.sort();
    assert_eq!(listed, json!(want));
    let options = browser
        .eval("Array.from(document.querySelectorAll('#known-projects option')).map(o => o.value).sort()")
        .unwrap();
    assert_eq!(options, json!(want));
    // The failure, and the command that continues, as `baton epic run` ends with.
    let failure = browser
        .eval("document.getElementById('epic-failure').textContent")
        .unwrap();
    assert!(
        failure.as_str().unwrap().contains("2-1-create-board"),
        "{failure}"
    );
    let next = browser
        .eval("document.getElementById('epic-next').textContent")
        .unwrap();
    let command = browser
        .eval("document.querySelector('#epic-next code').textContent")
        .unwrap();
    assert_eq!(
        command,
        json!(format!("baton epic resume --project {}", shown(&f.paused)))
    );
    assert_eq!(
        next,
        json!(format!(
            "Next: paused at create-story of 2-1-create-board; fix the cause, then baton epic resume --project {}",
            shown(&f.paused)
        ))
    );
    // The story never reached review: no review cycle on its card.
    let tags = browser
        .eval("Array.from(document.querySelectorAll('.story[data-story=\"2-1-create-board\"] .tag')).map(t => t.textContent)")
        .unwrap();
    assert!(
        !tags
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().unwrap().contains("review cycle")),
        "{tags}"
    );
    browser
        .save_screenshot(&shots().join("epic-paused.png"))
        .unwrap();

    // A project without BMAD files, typed in: a calm page saying what makes a board.
    serve.open(
        &mut browser,
        &format!("/epic?project={}", url(&shown(&f.story))),
    );
    let calm = wait(
        &mut browser,
        "the page of a project without a sprint",
        "!!document.getElementById('epic-no-sprint') && [document.querySelectorAll('main [role=alert], main .error').length, \
           document.getElementById('epic-no-sprint').textContent]",
    );
    assert_eq!(calm[0], json!(0), "{calm}");
    let text = calm[1].as_str().unwrap();
    assert!(
        text.contains("sprint-planning") && text.contains("baton demo epic"),
        "{text}"
    );
}

#[test]
fn a_failed_run_says_its_hint_and_the_command_that_retries() {
    let Some(mut browser) = browser() else { return };
    let f = fixture();
    let serve = Serve::start_in(&f.home, &f.story);
    serve.open(&mut browser, &format!("/runs/{}", f.failed_run));
    let seen = wait(
        &mut browser,
        "the run's error",
        "!!document.getElementById('run-error') && ['run-error', 'run-hint', 'run-next'].map(id => \
           document.getElementById(id) ? document.getElementById(id).textContent : null)",
    );
    let seen: Vec<Option<String>> = serde_json::from_value(seen).unwrap();
    assert!(
        seen[0].as_deref().unwrap().contains("LLM_CONNECT_ERROR"),
        "{seen:?}"
    );
    assert!(
        seen[1]
            .as_deref()
            .is_some_and(|h| h.contains("the model was never reached")),
        "{seen:?}"
    );
    assert_eq!(
        seen[2].as_deref(),
        Some(
            format!(
                "Next: the run is kept; retry with: baton resume {}",
                &f.failed_run[..13]
            )
            .as_str()
        )
    );
}

#[test]
fn tool_results_show_text_as_text_and_the_json_folded() {
    let Some(mut browser) = browser() else { return };
    let f = fixture();
    let serve = Serve::start_in(&f.home, &f.story);
    serve.open(&mut browser, &format!("/runs/{}", f.story_run));
    let tools = wait(
        &mut browser,
        "the tool results",
        "document.querySelectorAll('#conversation .msg.tool').length > 0 && \
           Array.from(document.querySelectorAll('#conversation .msg.tool')).map(m => ({ \
             texts: Array.from(m.querySelectorAll('.tool-text .body')).map(b => b.textContent), \
             json: Array.from(m.querySelectorAll('details.tool-json')).map(d => d.open), \
             raw: Array.from(m.querySelectorAll(':scope > .body')).map(b => b.textContent) }))",
    );
    browser
        .eval("document.querySelector('#conversation .msg.tool').scrollIntoView(); true")
        .unwrap();
    browser
        .save_screenshot(&shots().join("tool-results.png"))
        .unwrap();
    let tools = tools.as_array().unwrap();
    // Every JSON answer is folded, and none is shown raw.
    for t in tools {
        assert_eq!(t["json"], json!([false]), "{t}");
        for raw in t["raw"].as_array().unwrap() {
            assert!(!raw.as_str().unwrap().starts_with('{'), "raw JSON: {raw}");
        }
    }
    // A file read shows the file's lines as lines, no `\n` escapes.
    let texts: Vec<&str> = tools
        .iter()
        .flat_map(|t| t["texts"].as_array().unwrap())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(texts.iter().any(|t| t.contains('\n')), "{texts:?}");
    assert!(texts.iter().all(|t| !t.contains("\\n")), "{texts:?}");
}

#[test]
fn a_completed_session_is_done_in_the_list_and_on_its_page() {
    let Some(mut browser) = browser() else { return };
    let f = fixture();
    let serve = Serve::start_in(&f.home, &f.session);
    let project = url(&shown(&f.session));
    serve.open(&mut browser, &format!("/sessions?project={project}"));
    let row = format!("tr[data-session-id={}]", js_string(&f.session_id));
    let cells = wait(
        &mut browser,
        "the session's row",
        &format!(
            "!!document.querySelector({0}) && Array.from(document.querySelector({0}).cells).map(c => c.textContent)",
            js_string(&row)
        ),
    );
    assert_eq!(cells[1], json!("completed"), "{cells}");
    assert_eq!(cells[3], json!("done (started at analyze)"), "{cells}");
    serve.open(
        &mut browser,
        &format!("/sessions/{}?project={project}", f.session_id),
    );
    let position = wait(
        &mut browser,
        "the session's facts",
        "(() => { const dt = Array.from(document.querySelectorAll('dt')).find(d => d.textContent === 'Position'); \
           return dt && dt.nextElementSibling.textContent; })()",
    );
    assert_eq!(position, json!("done (started at analyze)"));
}

#[test]
fn the_queue_page_without_a_database_says_how_to_connect_one() {
    let Some(mut browser) = browser() else { return };
    let f = fixture();
    let serve = Serve::start_in(&f.home, &f.story);
    serve.open(&mut browser, "/queue");
    let seen = wait(
        &mut browser,
        "the queue page",
        "!!document.getElementById('queue-setup') && [document.querySelectorAll('main [role=alert], main .error').length, \
           document.getElementById('queue-setup').textContent]",
    );
    assert_eq!(seen[0], json!(0), "{seen}");
    assert!(
        seen[1].as_str().unwrap().contains("baton serve --db URL"),
        "{seen}"
    );
}
