//! `baton epic run <EPIC> --queue URL --parallel 3`: an epic of six stories run by three
//! `baton worker` processes against a real throwaway PostgreSQL and a bare git repository as the
//! project's remote, the played model on loopback. It ends as the same epic run here with
//! `--parallel 3` does: the same statuses in sprint-status.yaml, one commit per story on the
//! epic's branch, the same story and source files. Then again with the orchestrator and a worker
//! holding a story SIGKILLed mid-way (`baton epic resume` and a new worker take over). Skips
//! without PostgreSQL unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use baton_testkit::git::git;
use baton_testkit::pg::{PgServer, postgres_or_skip};
use common::repo;
use player::{Player, Scenario};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const IMPL: &str = "_bmad-output/implementation-artifacts";
const KEY: &str = "sk-epic-queue-test-0123456789";
const MORE: [&str; 3] = ["1-4-profile-page", "1-5-session-timeout", "1-6-audit-log"];

/// The sample project with six stories in epic 1, committed on `main`.
fn sample(into: &Path) -> PathBuf {
    sample_of(into, &MORE)
}

/// The sample project (three stories in epic 1) with `more` stories, committed on `main`.
fn sample_of(into: &Path, more: &[&str]) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    std::fs::write(
        project.join("baton.toml"),
        "[autopilot.git]\ncommit = true\n",
    )
    .unwrap();
    let sprint = project.join(IMPL).join("sprint-status.yaml");
    let text = std::fs::read_to_string(&sprint).unwrap();
    let more: String = more.iter().map(|k| format!("  {k}: backlog\n")).collect();
    let text = text.replacen(
        "  1-3-password-reset: backlog\n",
        &format!("  1-3-password-reset: backlog\n{more}"),
        1,
    );
    std::fs::write(&sprint, text).unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    project
}

/// `sample` with a bare repository as its remote, `main` pushed.
fn sample_with_remote(into: &Path) -> PathBuf {
    with_remote(into, sample(into))
}

fn with_remote(into: &Path, project: PathBuf) -> PathBuf {
    let bare = into.join("remote.git");
    git(into, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(
        &project,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    git(&project, &["push", "-q", "origin", "main"]);
    project
}

fn scenario() -> Scenario {
    Scenario {
        changes: vec![("1-3-password-reset".into(), 1)],
        delay: Duration::from_millis(20),
        ..Scenario::default()
    }
}

fn baton(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.env("BATON_HOME", home)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", KEY)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null());
    cmd
}

/// The orchestrator's command: the played model by name and endpoint.
fn epic(home: &Path, player: &Player, args: &[&str]) -> Command {
    let mut cmd = baton(home);
    cmd.args(args)
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played");
    cmd
}

fn worker(home: &Path, url: &str, lease_s: &str) -> Child {
    let log = std::fs::File::create(home.with_extension("log")).unwrap();
    baton(home)
        .args(["worker", "--db", url, "--lease-s", lease_s])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn psql(pg: &PgServer, sql: &str) -> String {
    pg.psql("postgres", sql).unwrap().trim().to_string()
}

/// Polls `sql` until `done` says its output is what is waited for (an event in the database).
fn wait_until(pg: &PgServer, sql: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let out = psql(pg, sql);
        if done(&out) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting on {sql}: {out}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn output(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn logs(root: &Path) -> String {
    let mut text = String::new();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "log") {
            text.push_str(&format!("--- {}\n", e.path().display()));
            text.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    text
}

/// What must be the same however the epic ran: sprint-status.yaml (but its timestamp), the
/// commit subjects of the epic's branch, the tracked files, and the story and source files.
/// sprint-status.yaml, commit subjects, tracked files, story and source files with their text.
type EndState = (String, Vec<String>, Vec<String>, Vec<(String, String)>);

fn end_state(project: &Path) -> EndState {
    let sprint: String = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("last_updated:"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut subjects: Vec<String> = git(project, &["log", "--format=%s", "main"])
        .lines()
        .map(String::from)
        .collect();
    subjects.sort();
    let tracked: Vec<String> = git(project, &["ls-files"])
        .lines()
        .map(String::from)
        .collect();
    let files = tracked
        .iter()
        .filter(|f| f.starts_with("src/") || (f.starts_with(IMPL) && f.ends_with(".md")))
        .map(|f| (f.clone(), std::fs::read_to_string(project.join(f)).unwrap()))
        .collect();
    (sprint, subjects, tracked, files)
}

/// The epic run here, three stories at a time: what the queued runs must end as.
fn reference(root: &Path) -> EndState {
    let project = sample(&root.join("local"));
    let player = Player::start(&project, scenario());
    let p = project.to_str().unwrap();
    let out = epic(
        &root.join("local-home"),
        &player,
        &[
            "epic",
            "run",
            "epic-1",
            "-p",
            p,
            "--parallel",
            "3",
            "--non-interactive",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    let state = end_state(&project);
    // Six stories, one commit each, all done.
    assert_eq!(state.1.len(), 7, "{:?}", state.1);
    assert!(state.0.contains("  1-6-audit-log: done"), "{}", state.0);
    assert!(state.0.contains("  epic-1: done"), "{}", state.0);
    state
}

fn init(pg: &PgServer, home: &Path) -> String {
    let url = pg.socket_url("postgres");
    let out = baton(home)
        .args(["queue", "init", "--db", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output(&out));
    url
}

fn wait_child(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        assert!(Instant::now() < deadline, "the orchestrator did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_queued_epic_on_three_workers_ends_as_the_local_parallel_run_and_survives_kills() {
    let Some(pg) = postgres_or_skip("a_queued_epic_on_three_workers") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let expected = reference(root);

    // 1. Three workers, the orchestrator holding the epic.
    let url = init(&pg, &root.join("init-home"));
    let project = sample_with_remote(&root.join("queued"));
    let player = Player::start(&project, scenario());
    let p = project.to_str().unwrap();
    let mut workers: Vec<Child> = (0..3)
        .map(|i| worker(&root.join(format!("worker-{i}")), &url, "30"))
        .collect();
    let orchestrator = epic(
        &root.join("orchestrator-home"),
        &player,
        &[
            "epic",
            "run",
            "epic-1",
            "-p",
            p,
            "--queue",
            &url,
            "--parallel",
            "3",
            "--non-interactive",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // A second orchestrator of the same epic (another clone of the remote) is refused while
    // the first holds the epic's lease.
    wait_until(
        &pg,
        "SELECT count(*) FROM baton.work_units WHERE kind = 'story'",
        |n| n != "0",
    );
    let clone = root.join("clone");
    git(
        root,
        &[
            "clone",
            "-q",
            "-b",
            "main",
            root.join("queued/remote.git").to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    let second = epic(
        &root.join("second-home"),
        &player,
        &[
            "epic",
            "run",
            "epic-1",
            "-p",
            clone.to_str().unwrap(),
            "--queue",
            &url,
            "--non-interactive",
        ],
    )
    .output()
    .unwrap();
    let text = output(&second);
    assert_eq!(second.status.code(), Some(1), "{text}");
    assert!(text.contains("EPIC_QUEUE_LEASE_HELD"), "{text}");
    let out = wait_child(orchestrator);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        output(&out),
        logs(root)
    );
    assert_eq!(end_state(&project), expected);
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) || ':' || count(DISTINCT payload->>'story') FROM baton.work_units \
             WHERE kind = 'story' AND state = 'done'"
        ),
        "6:6"
    );
    // Each approved story was pushed to a branch that carries its epoch; the epic's
    // orchestrator let its lease go.
    let branches = git(
        &root.join("queued/remote.git"),
        &["branch", "--list", "baton/*"],
    );
    assert_eq!(branches.lines().count(), 6, "{branches}");
    assert!(
        branches.contains("baton/epic-1/1-4-profile-page/epoch-1"),
        "{branches}"
    );
    assert_eq!(
        psql(&pg, "SELECT expires_at <= now() FROM baton.epic_leases"),
        "t"
    );
    // No story's worktree or branch is left in the project.
    assert_eq!(git(&project, &["branch", "--list", "baton/*"]), "");
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }

    // 2. The same on a fresh queue, the orchestrator and a worker holding a story killed
    //    mid-way; both started again.
    psql(&pg, "DROP SCHEMA baton CASCADE");
    let url = init(&pg, &root.join("init-home"));
    let project = sample_with_remote(&root.join("killed"));
    let player = Player::start(&project, scenario());
    let p = project.to_str().unwrap();
    let mut workers: Vec<Child> = (0..3)
        .map(|i| worker(&root.join(format!("kworker-{i}")), &url, "2"))
        .collect();
    let home = root.join("korchestrator-home");
    let run = [
        "epic",
        "run",
        "epic-1",
        "-p",
        p,
        "--queue",
        &url,
        "--parallel",
        "3",
        "--non-interactive",
    ];
    let mut orchestrator = epic(&home, &player, &run)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Mid-way: two stories done, and a story leased with a checkpoint behind it.
    wait_until(
        &pg,
        "SELECT count(*) FROM baton.work_units WHERE kind = 'story' AND state = 'done'",
        |n| n.parse::<u32>().unwrap() >= 2,
    );
    let victim = wait_until(
        &pg,
        "SELECT coalesce(max(u.id || ' ' || u.owner), '') FROM baton.work_units u \
         WHERE u.state = 'leased' AND EXISTS (SELECT 1 FROM baton.unit_writes w \
         WHERE w.unit_id = u.id AND w.kind = 'story-checkpoint' AND w.epoch = u.epoch)",
        |s| !s.is_empty(),
    );
    orchestrator.kill().unwrap();
    orchestrator.wait().unwrap();
    let (unit, owner) = victim.split_once(' ').unwrap();
    let pid: u32 = owner.split(':').nth(1).unwrap().parse().unwrap();
    let at = workers.iter().position(|w| w.id() == pid).unwrap();
    let mut dead = workers.remove(at);
    dead.kill().unwrap();
    dead.wait().unwrap();
    let last_before = psql(
        &pg,
        &format!(
            "SELECT coalesce(body->>'phase', 'approved') FROM baton.unit_writes \
             WHERE unit_id = {unit} AND kind = 'story-checkpoint' ORDER BY seq DESC LIMIT 1"
        ),
    );
    workers.push(worker(&root.join("kworker-new"), &url, "2"));
    let resumed = epic(
        &home,
        &player,
        &["epic", "resume", "-p", p, "--non-interactive"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = wait_child(resumed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        output(&out),
        logs(root)
    );
    assert_eq!(end_state(&project), expected);
    // The killed worker's story was taken over at a later epoch, from its last checkpoint:
    // the first checkpoint of the new holder is past the phase the old one had reached.
    let epochs = psql(
        &pg,
        &format!(
            "SELECT state || ':' || (epoch > 1)::text FROM baton.work_units WHERE id = {unit}"
        ),
    );
    assert_eq!(epochs, "done:true");
    let first_after = psql(
        &pg,
        &format!(
            "SELECT coalesce(body->>'phase', 'approved') FROM baton.unit_writes w \
             WHERE unit_id = {unit} AND kind = 'story-checkpoint' AND epoch > \
             (SELECT min(epoch) FROM baton.unit_writes WHERE unit_id = {unit}) \
             ORDER BY seq LIMIT 1"
        ),
    );
    assert_ne!(first_after, "", "no checkpoint after the takeover");
    let order = [
        "create-story",
        "validate",
        "dev",
        "revision",
        "code-review",
        "approved",
    ];
    let rank = |p: &str| order.iter().position(|o| *o == p).unwrap();
    assert!(
        rank(&first_after) > rank(&last_before) || last_before == "code-review",
        "taken over at {last_before}, went on at {first_after}"
    );
    // Every story ended exactly once.
    assert_eq!(
        psql(
            &pg,
            "SELECT count(DISTINCT payload->>'story') || ':' || \
             count(*) FILTER (WHERE state = 'done') FROM baton.work_units WHERE kind = 'story'"
        ),
        "6:6"
    );
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
}

#[test]
fn a_queued_storys_question_waits_in_the_database_and_baton_epic_answer_answers_it() {
    let Some(pg) = postgres_or_skip("a_queued_storys_question_waits") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let url = init(&pg, &root.join("init-home"));
    let home = root.join("orchestrator-home");
    // The dev phase runs a package installed in the orchestrator's store: it is pinned into
    // the database and the workers install it from there.
    let out = baton(&home)
        .args([
            "package",
            "install",
            repo()
                .join("examples/packages/bmad-phase4")
                .to_str()
                .unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output(&out));
    let project = sample_of(root, &[]);
    std::fs::write(
        project.join("baton.toml"),
        "[autopilot.git]\ncommit = true\n\n[autopilot.phases.dev]\npackage = \"bmad-phase4\"\n",
    )
    .unwrap();
    git(
        &project,
        &[
            "commit",
            "-q",
            "-am",
            "dev phase from the installed package",
        ],
    );
    let project = with_remote(root, project);
    let a = "1-1-project-scaffold";
    let question = "Which port does the API listen on?";
    // C's question is answered on its unit directly, from any machine.
    let c = "1-3-password-reset";
    let other = "Which mail server sends the reset link?";
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![
                (a.into(), "dev".into(), 1, question.into()),
                (c.into(), "dev".into(), 1, other.into()),
            ],
            ..Scenario::default()
        },
    );
    let p = project.to_str().unwrap();
    let mut workers: Vec<Child> = (0..2)
        .map(|i| worker(&root.join(format!("worker-{i}")), &url, "30"))
        .collect();
    // The other stories end; the orchestrator stops with the question (exit 10).
    let out = epic(
        &home,
        &player,
        &[
            "epic",
            "run",
            "epic-1",
            "-p",
            p,
            "--queue",
            &url,
            "--parallel",
            "3",
            "--non-interactive",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(10),
        "{}\n{}",
        output(&out),
        logs(root)
    );
    assert!(output(&out).contains(question), "{}", output(&out));
    assert_eq!(
        psql(
            &pg,
            &format!(
                "SELECT state FROM baton.work_units WHERE payload->>'story' = '{a}' \
                 ORDER BY id DESC LIMIT 1"
            )
        ),
        "waiting"
    );
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) || ':' || min(name) || ':' || (SELECT count(*) FROM baton.work_units \
             WHERE jsonb_array_length(payload->'packages') = 1) FROM baton.packages"
        ),
        "1:bmad-phase4:3"
    );
    // `baton epic status` shows it where it is answered.
    let st = epic(&home, &player, &["epic", "status", "-p", p])
        .output()
        .unwrap();
    assert!(output(&st).contains(question), "{}", output(&st));
    let sprint = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml")).unwrap();
    assert!(
        sprint.contains("  1-2-user-authentication: done"),
        "{sprint}"
    );
    assert!(sprint.contains(&format!("  {a}: in-progress")), "{sprint}");
    let unit_of = |key: &str| {
        psql(
            &pg,
            &format!(
                "SELECT id FROM baton.work_units WHERE payload->>'story' = '{key}' \
                 ORDER BY id DESC LIMIT 1"
            ),
        )
    };
    let c_unit = unit_of(c);
    let out = baton(&home)
        .args(["answer", &c_unit, "--db", &url, "smtp.internal"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output(&out));
    // A worker finishes C with no orchestrator running.
    wait_until(
        &pg,
        &format!("SELECT state FROM baton.work_units WHERE id = {c_unit}"),
        |s| s == "done",
    );

    // The answer (no --queue: resume and answer remember it) goes to the unit; a worker
    // claims it again and the story goes on with the answer, to done.
    let out = epic(
        &home,
        &player,
        &[
            "epic",
            "answer",
            a,
            "port 8080",
            "-p",
            p,
            "--non-interactive",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        output(&out),
        logs(root)
    );
    let sprint = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml")).unwrap();
    assert!(sprint.contains(&format!("  {a}: done")), "{sprint}");
    assert!(sprint.contains("  epic-1: done"), "{sprint}");
    let code = std::fs::read_to_string(project.join(format!("src/{a}.txt"))).unwrap();
    assert!(code.contains("answer: port 8080"), "{code}");
    let code = std::fs::read_to_string(project.join(format!("src/{c}.txt"))).unwrap();
    assert!(code.contains("answer: smtp.internal"), "{code}");
    // No question is left waiting on the board.
    let st = epic(&home, &player, &["epic", "status", "-p", p])
        .output()
        .unwrap();
    assert!(!output(&st).contains(other), "{}", output(&st));
    assert!(!output(&st).contains(question), "{}", output(&st));
    assert_eq!(
        psql(
            &pg,
            &format!(
                "SELECT state || ':' || epoch FROM baton.work_units WHERE payload->>'story' = '{a}'"
            )
        ),
        "done:2"
    );
    // init, the configuration's commit, and one per story.
    let subjects = git(&project, &["log", "--format=%s", "main"]);
    assert_eq!(subjects.lines().count(), 5, "{subjects}");
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
}

#[test]
fn a_queued_story_whose_merge_conflicts_goes_back_to_dev_on_a_worker_and_is_merged() {
    let Some(pg) = postgres_or_skip("a_queued_story_whose_merge_conflicts") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let url = init(&pg, &root.join("init-home"));
    let project = with_remote(root, sample_of(root, &[]));
    let both = ["1-1-project-scaffold", "1-3-password-reset"];
    let player = Player::start(
        &project,
        Scenario {
            same_lines: both.iter().map(|s| s.to_string()).collect(),
            ..Scenario::default()
        },
    );
    let p = project.to_str().unwrap();
    let mut workers: Vec<Child> = (0..2)
        .map(|i| worker(&root.join(format!("worker-{i}")), &url, "30"))
        .collect();
    let out = epic(
        &root.join("orchestrator-home"),
        &player,
        &[
            "epic",
            "run",
            "epic-1",
            "-p",
            p,
            "--queue",
            &url,
            "--parallel",
            "3",
            "--non-interactive",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        output(&out),
        logs(root)
    );
    // Both wrote the first line of src/shared.txt from the same base: whichever was approved
    // second conflicted on rebase, went back to dev on a worker with the conflict marked in
    // its files, resolved it, and was merged.
    let resolved = player.resolved();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    let (second, told) = &resolved[0];
    assert!(both.contains(&second.as_str()), "{second}");
    assert!(told.contains("src/shared.txt"), "{told}");
    let first = both.iter().find(|k| *k != second).unwrap();
    assert_eq!(
        std::fs::read_to_string(project.join("src/shared.txt")).unwrap(),
        format!("shared: {first}\nshared: {second}\n")
    );
    let log = git(&project, &["log", "--format=%s", "main"]);
    assert_eq!(log.lines().count(), 4, "{log}");
    let sprint = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml")).unwrap();
    assert!(sprint.contains("  epic-1: done"), "{sprint}");
    // The story sent back is a second unit of its story, going on from the first.
    assert_eq!(
        psql(
            &pg,
            &format!(
                "SELECT string_agg(state || ':' || coalesce(payload->>'fromUnit', '-') || ':' || \
                 (payload->>'backToDev' IS NOT NULL)::text, ',' ORDER BY id) \
                 FROM baton.work_units WHERE payload->>'story' = '{second}'"
            )
        ),
        format!(
            "done:-:false,done:{}:true",
            psql(
                &pg,
                &format!(
                    "SELECT min(id) FROM baton.work_units WHERE payload->>'story' = '{second}'"
                )
            )
        )
    );
    assert_eq!(git(&project, &["status", "--porcelain", "--", "src"]), "");
    assert_eq!(git(&project, &["branch", "--list", "baton/*"]), "");
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
}

#[test]
fn an_epic_whose_project_cannot_travel_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // No database is reached: these are refused first.
    let url = "postgresql://baton@127.0.0.1:1/none";
    let player = Player::start(root, Scenario::default());
    let run = |project: &Path| {
        epic(
            &root.join("home"),
            &player,
            &[
                "epic",
                "run",
                "epic-1",
                "-p",
                project.to_str().unwrap(),
                "--queue",
                url,
                "--non-interactive",
                "--json",
            ],
        )
        .output()
        .unwrap()
    };
    let code_of = |out: &Output| -> String {
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", output(out)));
        v["error"]["code"].as_str().unwrap_or("").to_string()
    };
    // A repository without a remote.
    let project = sample_of(&root.join("a"), &[]);
    let out = run(&project);
    assert_eq!(out.status.code(), Some(2), "{}", output(&out));
    assert_eq!(code_of(&out), "QUEUE_NO_REMOTE");
    assert_eq!(
        git(
            &project,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
    // A remote that does not answer.
    git(
        &project,
        &[
            "remote",
            "add",
            "origin",
            root.join("gone.git").to_str().unwrap(),
        ],
    );
    let out = run(&project);
    assert_eq!(out.status.code(), Some(2), "{}", output(&out));
    assert_eq!(code_of(&out), "QUEUE_REMOTE_UNREACHABLE");
    assert_eq!(
        git(
            &project,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
    // One story at a time only with `epic run`.
    let out = epic(
        &root.join("home"),
        &player,
        &[
            "epic",
            "story",
            "1-1-project-scaffold",
            "-p",
            project.to_str().unwrap(),
            "--queue",
            url,
            "--json",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output(&out));
    assert_eq!(code_of(&out), "EPIC_QUEUE_UNSUPPORTED");
}
