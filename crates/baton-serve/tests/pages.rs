//! The pages through the real server on 127.0.0.1: the token rules, the runs list with its
//! filters and cursor, a run page with hostile names and model text, the epic board, the
//! sessions list, the assets, and the CSP (no inline script or style anywhere).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_serve::auth::Token;
use baton_serve::server::{ServeOptions, bind_with_token};
use baton_store::{GuardOptions, NewRun, Phase, Project, RunMetadata, Store};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TOKEN: &str = "test-token-0123456789abcdef";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "baton-pages-{name}-{}-{}",
            std::process::id(),
            baton_store::time::now_rfc3339().replace(':', "")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server over a fresh store, stopped when dropped.
struct Server {
    addr: SocketAddr,
    store: Store,
    tmp: TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(name: &str) -> Server {
        let tmp = TempDir::new(name);
        let store = Store::new(tmp.0.join("home"));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = store.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let bound =
                    bind_with_token(ServeOptions::loopback(served), Token::from_text(TOKEN))
                        .await
                        .unwrap();
                addr_tx.send(bound.addr()).unwrap();
                let _ = bound
                    .serve(async move {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let addr = addr_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        Server {
            addr,
            store,
            tmp,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// A GET with the given extra header lines; (status, headers, body).
    fn get_with(&self, path: &str, headers: &[String]) -> (u16, String, String) {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        for h in headers {
            request.push_str(h);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), body.to_string())
    }

    /// A GET as a browser after the first load: with the cookie.
    fn page(&self, path: &str) -> (u16, String) {
        let (status, _, body) = self.get_with(path, &[format!("Cookie: baton_token={TOKEN}")]);
        (status, body)
    }

    fn project(&self, name: &str) -> Project {
        let root = self.tmp.0.join(name);
        std::fs::create_dir_all(&root).unwrap();
        self.store.project(&root).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn create_run(store: &Store, project: &Project) -> RunMetadata {
    let package = Package::load(&repo().join("examples/packages/create-story-micro")).unwrap();
    let installed = store.packages().install(&package, "test").unwrap().package;
    project
        .create_run(NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: None,
            agent_id: "sm",
        })
        .unwrap()
}

/// Markup a strict CSP would block, or that would mean an escaping hole.
fn assert_no_inline_code(html: &str) {
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("<script>"), "inline script");
    assert!(!lower.contains("style="), "inline style");
    assert!(!lower.contains("<style"), "style element");
    // Attribute names of every tag (outside quoted values: escaped text may say `onerror=`).
    for tag in lower.split('<').skip(1).filter_map(|t| t.split('>').next()) {
        let mut quote = None;
        let mut name = String::new();
        for c in tag.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '=') => {
                    assert!(
                        !name.starts_with("on"),
                        "event handler attribute in <{tag}>"
                    );
                    name.clear();
                }
                (None, c) if c.is_whitespace() => name.clear(),
                (None, c) => name.push(c),
            }
        }
        assert!(!tag.contains("javascript:"), "javascript URL in <{tag}>");
    }
}

#[test]
fn pages_need_the_token_and_the_first_load_sets_the_cookie() {
    let server = Server::start("token");
    for path in [
        "/",
        "/start",
        "/epic",
        "/sessions",
        "/runs/nope",
        "/assets/app.js",
    ] {
        let (status, _, body) = server.get_with(path, &[]);
        assert_eq!(status, 401, "{path} without a token");
        assert!(!body.contains("baton-token"), "{path} leaked the page");
        let (status, _, _) = server.get_with(path, &["Cookie: baton_token=wrong".to_string()]);
        assert_eq!(status, 401, "{path} with a wrong token");
    }
    let (status, head, _) = server.get_with(&format!("/start?token={TOKEN}"), &[]);
    assert_eq!(status, 303);
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("location: /start\r\n"), "{head}");
    assert!(
        lower.contains("set-cookie: baton_token=") && lower.contains("httponly"),
        "{head}"
    );
    for path in ["/", "/start", "/epic", "/sessions"] {
        let (status, body) = server.page(path);
        assert_eq!(status, 200, "{path}");
        assert!(body.contains(&format!("<meta name=\"baton-token\" content=\"{TOKEN}\">")));
        assert_no_inline_code(&body);
    }
    let (status, body) = server.page("/runs/nope");
    assert_eq!(status, 404);
    assert!(body.contains("RUN_NOT_FOUND"));
}

#[test]
fn assets_are_served_with_their_types_under_the_csp() {
    let server = Server::start("assets");
    let cookie = [format!("Cookie: baton_token={TOKEN}")];
    let (status, head, body) = server.get_with("/assets/app.js", &cookie);
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/javascript")
    );
    assert!(body.contains("Authorization"));
    let (status, head, body) = server.get_with("/assets/app.css", &cookie);
    assert_eq!(status, 200);
    assert!(head.to_ascii_lowercase().contains("content-type: text/css"));
    assert!(body.contains(".graph"));
    // The icon a browser asks for on every page (a 404 in its log before).
    for path in ["/favicon.svg", "/favicon.ico"] {
        let (status, head, body) = server.get_with(path, &cookie);
        assert_eq!(status, 200, "{path}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: image/svg+xml"),
            "{head}"
        );
        assert!(body.starts_with("<svg ") && !body.contains("<script"));
    }
    let (_, page) = server.page("/");
    assert!(page.contains("<link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">"));
    let (_, head, _) = server.get_with("/", &cookie);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{head}"
    );
}

#[test]
fn the_runs_page_is_newest_first_filtered_and_paged_by_cursor() {
    let server = Server::start("list");
    let project = server.project("proj");
    let mut ids = Vec::new();
    for i in 0..55 {
        let run = create_run(&server.store, &project);
        if i % 5 == 0 {
            project
                .update_run(&run.run_id, |r| {
                    r.phase = Phase::WaitingUser;
                    r.waiting_for = Some(json!({"question": "?"}));
                })
                .unwrap();
        }
        ids.push(run.run_id);
    }
    let (status, body) = server.page("/");
    assert_eq!(status, 200);
    assert_eq!(body.matches("<tr data-run-id=").count(), 50);
    // Newest first: the last created is the first row.
    let first = body.find(&format!("data-run-id=\"{}\"", ids[54])).unwrap();
    let second = body.find(&format!("data-run-id=\"{}\"", ids[53])).unwrap();
    assert!(first < second);
    assert!(!body.contains(&format!("data-run-id=\"{}\"", ids[0])));
    let href = body
        .split("id=\"page-older\" data-testid=\"page-older\" href=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .replace("&amp;", "&");
    let (status, older) = server.page(&href);
    assert_eq!(status, 200);
    assert_eq!(older.matches("<tr data-run-id=").count(), 5);
    assert!(older.contains(&format!("data-run-id=\"{}\"", ids[0])));
    assert!(older.contains("id=\"page-newest\""));
    assert!(!older.contains("id=\"page-older\""));
    // The phase filter keeps the waiting runs only.
    let (_, waiting) = server.page("/?phase=waiting-user");
    assert_eq!(waiting.matches("<tr data-run-id=").count(), 11);
    assert!(waiting.contains("<option value=\"waiting-user\" selected>"));
    // A workflow nobody ran: an empty page that says so.
    let (_, none) = server.page("/?workflow=%3Cscript%3E");
    assert!(none.contains("id=\"runs-empty\""));
    assert!(none.contains("value=\"&lt;script&gt;\""));
    assert_no_inline_code(&none);
    // A cursor this server never gave is reported on the page, not a crash.
    let (status, bad) = server.page("/?cursor=junk");
    assert_eq!(status, 200);
    assert!(bad.contains("QUERY_INVALID"));
}

#[test]
fn a_run_page_escapes_hostile_names_model_text_and_artifacts() {
    let server = Server::start("hostile");
    // A project directory a person could name this way.
    let project = server.project("p-<img src=x onerror=alert(1)>\"'");
    let run = create_run(&server.store, &project);
    let package = Package::load(&repo().join("examples/packages/create-story-micro")).unwrap();
    let graph = &package.workflow(&run.workflow_ref).unwrap().graph;
    project
        .state_file(&run.run_id)
        .patch(
            graph,
            &json!({"artifacts": {"append": "artifacts/<script>alert(2)</script>\".md"}}),
            None,
            GuardOptions::default(),
        )
        .unwrap();
    project
        .update_run(&run.run_id, |r| {
            r.phase = Phase::WaitingUser;
            r.waiting_for = Some(json!({
                "question": "Pick one: <script>alert(3)</script>",
                "nodeId": "step-01-select-story",
                "reason": "ui_ask_user",
                "widget": {"type": "selection", "widgetId": "w\"1", "message": "Pick <b>one</b>",
                           "options": [{"value": "\"><script>alert(4)</script>", "label": "<i>A</i>"}]}
            }));
        })
        .unwrap();
    let log = project.run_paths(&run.run_id).conversation_log;
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(
        &log,
        format!(
            "{}\n",
            json!({"kind": "messages", "reset": false, "messages": [
                {"role": "assistant", "content": "</div><script>alert(5)</script>",
                 "toolCalls": [{"id": "c1", "name": "fs.read<x>", "arguments": "{\"path\": \"'\\\"><svg onload=alert(6)>\"}"}]},
                {"role": "tool", "toolCallId": "c1", "content": "<iframe src=javascript:alert(7)>"}
            ]})
        ),
    )
    .unwrap();
    let (status, body) = server.page(&format!("/runs/{}", run.run_id));
    assert_eq!(status, 200, "{body}");
    assert_no_inline_code(&body);
    // The one script is app.js.
    assert_eq!(body.matches("<script").count(), 1);
    assert_eq!(
        body.matches("<script src=\"/assets/app.js\" defer>")
            .count(),
        1
    );
    for bad in ["<img", "<svg onload", "<iframe", "<b>one", "<i>A"] {
        let at = body
            .find(bad)
            .map(|i| &body[i.saturating_sub(200)..(i + 100).min(body.len())]);
        assert!(at.is_none(), "{bad} reached the page: {at:?}");
    }
    assert!(body.contains("data-widget-type=\"selection\""));
    assert!(body.contains("Pick &lt;b&gt;one&lt;/b&gt;"));
    assert!(body.contains("value=\"&quot;&gt;&lt;script&gt;alert(4)&lt;/script&gt;\""));
    assert!(body.contains("&lt;/div&gt;&lt;script&gt;alert(5)&lt;/script&gt;"));
    assert!(body.contains("&lt;iframe src=javascript:alert(7)&gt;") || body.contains("&lt;iframe"));
    assert!(body.contains("p-&lt;img src=x onerror=alert(1)&gt;&quot;&#39;"));
    assert!(body.contains(">artifacts/&lt;script&gt;alert(2)&lt;/script&gt;&quot;.md<"));
    assert!(
        body.contains("/artifacts/@project/artifacts/%3Cscript%3Ealert%282%29%3C/script%3E%22.md")
    );
    // The graph: the first node is current, the others pending.
    assert!(body.contains("data-testid=\"graph\""));
    assert!(body.contains("data-node-id=\"step-01-select-story\" data-status=\"current\""));
    assert!(body.contains(&format!("data-events=\"/api/runs/{}/events\"", run.run_id)));
}

#[test]
fn the_epic_board_and_the_sessions_list_of_a_project() {
    let server = Server::start("epic");
    let root = server.tmp.0.join("taskboard-epic");
    copy_dir(&repo().join("examples/projects/taskboard-epic"), &root);
    let project = root.display().to_string();
    let (status, body) = server.page(&format!("/epic?project={}", url(&project)));
    assert_eq!(status, 200);
    assert_no_inline_code(&body);
    assert!(body.contains("id=\"epic-summary\""), "{body}");
    assert!(body.contains("data-testid=\"board-0\""));
    assert!(body.contains("class=\"column\" data-status=\"backlog\""));
    // A project that is not there: said on the page.
    let (status, body) = server.page("/epic?project=%2Fno%2Fsuch%2Fdir");
    assert_eq!(status, 200);
    assert!(body.contains("id=\"epic-error\""));
    let (status, body) = server.page(&format!("/sessions?project={}", url(&project)));
    assert_eq!(status, 200);
    assert!(body.contains("id=\"sessions-empty\""));
    let (status, body) = server.page(&format!("/sessions/ralph-x?project={}", url(&project)));
    assert_eq!(status, 404);
    assert!(body.contains("SESSION_NOT_FOUND"));
}

/// After `baton epic run` finished the epic, the seed's state file says `paused` and has no
/// `lastStoryCompleted` (it is for `baton epic story`): the board says done and names the last
/// story finished, from baton's progress record.
#[test]
fn a_finished_epic_shows_done_and_its_last_completed_story() {
    let server = Server::start("epic-done");
    let root = server.tmp.0.join("taskboard-epic");
    copy_dir(&repo().join("examples/projects/taskboard-epic"), &root);
    let artifacts = root.join("_bmad-output/implementation-artifacts");
    let sprint = std::fs::read_to_string(artifacts.join("sprint-status.yaml")).unwrap();
    let mut done = sprint.clone();
    for key in [
        "epic-1",
        "1-1-project-scaffold",
        "1-2-user-authentication",
        "1-3-password-reset",
    ] {
        done = done.replace(&format!("  {key}: backlog"), &format!("  {key}: done"));
    }
    std::fs::write(artifacts.join("sprint-status.yaml"), &done).unwrap();
    let state = |status: &str| {
        json!({"epicId": "epic-1", "startedAt": "2026-11-22T10:00:00Z", "status": status,
               "currentStoryKey": null, "lastSteps": []})
        .to_string()
    };
    std::fs::write(artifacts.join(".run-epic-state.json"), state("paused")).unwrap();
    let progress = json!({"version": 1, "epicId": "epic-1", "target": {"mode": "epic", "maxStories": null},
        "completed": ["1-1-project-scaffold", "1-2-user-authentication", "1-3-password-reset"],
        "story": null, "runs": [], "failure": null});
    std::fs::write(
        artifacts.join(".baton-epic-progress.json"),
        progress.to_string(),
    )
    .unwrap();
    let page = |server: &Server| {
        let (status, body) = server.page(&format!(
            "/epic?project={}",
            url(&root.display().to_string())
        ));
        assert_eq!(status, 200, "{body}");
        body
    };
    let body = page(&server);
    assert!(
        body.contains("id=\"epic-standing\" data-standing=\"done\""),
        "{body}"
    );
    assert!(
        body.contains("<dt>Last completed</dt><dd>1-3-password-reset</dd>"),
        "{body}"
    );
    // The same epic not finished, the file left `running` by a killed process: interrupted.
    std::fs::write(artifacts.join("sprint-status.yaml"), &sprint).unwrap();
    std::fs::write(artifacts.join(".run-epic-state.json"), state("running")).unwrap();
    let body = page(&server);
    assert!(body.contains("data-standing=\"interrupted\""), "{body}");
    // Paused by `baton epic stop` (or at --max-stories).
    std::fs::write(artifacts.join(".run-epic-state.json"), state("paused")).unwrap();
    assert!(page(&server).contains("data-standing=\"paused\""));
    // Paused on the current story's question: waiting.
    let mut waiting: serde_json::Value = serde_json::from_str(&state("paused")).unwrap();
    waiting["currentStoryKey"] = json!("1-2-user-authentication");
    std::fs::write(artifacts.join(".run-epic-state.json"), waiting.to_string()).unwrap();
    let agent = json!({"storyKey": "1-2-user-authentication", "phase": "dev", "artifactsProduced": [],
        "questions": [{"id": "q1", "question": "Sessions or JWT?", "answer": null}]});
    std::fs::write(
        artifacts.join("1-2-user-authentication.agent-state.json"),
        agent.to_string(),
    )
    .unwrap();
    assert!(page(&server).contains("data-standing=\"waiting\""));
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

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_lifecycle_session_shows_its_steps_sub_goals_and_decisions() {
    use baton_lifecycle::ralph::verbs::{self, new::NewArgs};
    use baton_lifecycle::ralph::{Context, decisions};
    let server = Server::start("session");
    let home = server.tmp.0.join("user-home");
    let project = server.tmp.0.join("project");
    let skills = repo().join("examples/skills");
    copy_dir(&skills.join("claude"), &home.join(".claude"));
    copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(&project).unwrap();
    let ctx = Context {
        project: project.clone(),
        home: Some(home.clone()),
        maestro_home: Some(home.join(".maestro")),
        cli: "baton ralph".into(),
        owner: "pages@test".into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    };
    let out = verbs::new::run(
        &ctx,
        &NewArgs {
            intent: "add <script>alert(1)</script> export".into(),
            chain: "plan,verify,milestone-complete".into(),
            ..NewArgs::default()
        },
    )
    .unwrap();
    let status = PathBuf::from(out.json["path"].as_str().unwrap());
    let dir = status.parent().unwrap();
    let id = dir.file_name().unwrap().to_str().unwrap().to_string();
    decisions::append(
        dir,
        &json!({"node_id": "quality-gate", "verdict": "PROCEED", "timestamp": "2026-11-22T10:00:00Z",
                "summary": "fine <img src=x onerror=alert(2)>", "effect": "proceed"}),
    )
    .unwrap();
    let q = url(&project.display().to_string());
    let (status_code, list) = server.page(&format!("/sessions?project={q}"));
    assert_eq!(status_code, 200);
    assert!(
        list.contains(&format!("data-session-id=\"{id}\"")),
        "{list}"
    );
    assert!(list.contains("add &lt;script&gt;alert(1)&lt;/script&gt; export"));
    let (status_code, page) = server.page(&format!("/sessions/{id}?project={q}"));
    assert_eq!(status_code, 200, "{page}");
    assert_no_inline_code(&page);
    assert!(!page.contains("<img"));
    assert!(page.contains("data-testid=\"steps\""));
    assert!(page.matches("<li data-index=").count() >= 3);
    assert!(page.contains("data-testid=\"decisions\""));
    assert!(page.contains("fine &lt;img src=x onerror=alert(2)&gt;"));
    assert!(page.contains("phase-proceed\">PROCEED<"));
    // The steps' command files are shown from a known root, never as the host path.
    assert!(page.contains("<small class=\"path\">…/"), "{page}");
    assert!(
        !page.contains(&server.tmp.0.display().to_string()),
        "{page}"
    );
}

#[test]
fn a_widget_question_of_a_real_run_is_drawn_as_that_widget() {
    let server = Server::start("widget");
    let ask = json!({"widgetId": "fmt", "type": "form", "message": "Details <please>",
        "schema": {"properties": {"title": {"type": "string", "title": "Title"},
                                  "points": {"type": "integer"},
                                  "size": {"enum": ["S", "M"]}},
                   "required": ["title"]}});
    let run = run_waiting_on(&server, ask);
    let (status, body) = server.page(&format!("/runs/{}", run.run_id));
    assert_eq!(status, 200);
    assert_no_inline_code(&body);
    assert!(
        body.contains("data-widget-type=\"form\" data-widget-id=\"fmt\""),
        "{body}"
    );
    assert!(body.contains("Details &lt;please&gt;"));
    assert!(body.contains("data-field=\"title\" data-type=\"string\" required"));
    assert!(body.contains("data-field=\"points\" data-type=\"integer\""));
    assert!(body.contains("<option value=\"&quot;S&quot;\">S</option>"));
}

/// A run of the real engine waiting on the question `ask` (a `ui.ask_user` call).
fn run_waiting_on(server: &Server, ask: serde_json::Value) -> RunMetadata {
    use baton_engine::runner::{self, Settings, StartRun};
    use baton_llm::{ReplayModel, Trace};
    let project = server.tmp.0.join("taskboard");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let trace = Trace::from_value(json!({
        "traceVersion": "crewagent.runtime.llm.trace.v1",
        "dialogues": [{"id": "C01", "response": {"assistant": {"content": "",
            "toolCalls": [{"id": "a1", "name": "ui.ask_user", "arguments": ask}]}}}]
    }))
    .unwrap();
    let model = ReplayModel::new(trace);
    let pkg = repo().join("examples/packages/create-story-micro");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = rt
        .block_on(runner::start(
            &server.store,
            StartRun::new(&pkg, &project),
            Settings::new(&model),
        ))
        .unwrap();
    assert_eq!(done.run.phase, Phase::WaitingUser);
    done.run
}

/// app.js in a real browser: the confirmation answered in the page is sent as a widget
/// submission with the `widgetId` the model asked with (it went without one before).
#[test]
fn a_confirmation_answered_in_the_browser_carries_its_widget_id() {
    use baton_testkit::cdp::{Browser, chromium_or_skip};
    let Some(chromium) = chromium_or_skip("pages_confirmation") else {
        return;
    };
    let server = Server::start("confirm");
    let run = run_waiting_on(
        &server,
        json!({"widgetId": "apply-plan", "type": "confirmation", "message": "Apply the plan?"}),
    );
    let mut browser = Browser::launch(&chromium).unwrap();
    browser
        .navigate(&format!(
            "http://{}/runs/{}?token={TOKEN}",
            server.addr, run.run_id
        ))
        .unwrap();
    // Long enough for a loaded 2-core machine; the page answers in milliseconds.
    let step = Duration::from_secs(60);
    browser
        .wait_for(
            "document.readyState === 'complete' && !!document.getElementById('answer-confirm')",
            step,
        )
        .unwrap();
    // The POST is kept in the page, not sent: what matters is what app.js would send (no
    // model is configured to go on with).
    browser
        .eval(
            "(() => { const real = window.fetch; window.__posted = []; \
             window.fetch = (url, o) => { if (o && o.method === 'POST') { \
               window.__posted.push({url: String(url), body: o.body}); return new Promise(() => {}); } \
             return real(url, o); }; return true; })()",
        )
        .unwrap();
    browser.click("#answer-confirm").unwrap();
    let posted = browser
        .wait_for("window.__posted.length > 0 && window.__posted[0]", step)
        .unwrap();
    assert_eq!(
        posted["url"],
        format!("/api/runs/{}/answer", run.run_id),
        "{posted}"
    );
    let body: serde_json::Value = serde_json::from_str(posted["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"widget": {"widgetId": "apply-plan", "type": "confirmation", "value": {"confirmed": true}}})
    );
    let log = browser.log_text();
    assert!(!log.contains("exception:"), "{log}");
    assert!(!log.contains("404"), "{log}");
}
