//! What a phase's model can leave in the project (through `fs.write` or `terminal.run`) never
//! redirects, hangs or bloats the epic orchestrator: a BMAD configuration pointing at a forged
//! folder, an artifacts folder replaced by a link to outside the project, FIFOs, a sparse 8 GB
//! file and a hundred thousand questions where the orchestrator reads.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::{
    Command, EpicError, EpicEvent, EpicReport, EpicSettings, ModelSource, Phase, execute, status,
};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use support::player::Scenario;
use support::{Fixture, IMPL, snapshot};
use tokio_util::sync::CancellationToken;

fn run(epic: &str, max_stories: Option<u32>) -> Command {
    Command::Run {
        epic: epic.to_string(),
        max_stories,
    }
}

/// Runs `command`, calling `hostile` on every event (as a phase's model acting while its
/// phase runs).
async fn run_with(
    f: &Fixture,
    command: Command,
    hostile: &(dyn Fn(&EpicEvent) + Send + Sync),
) -> Result<EpicReport, EpicError> {
    let on_event = |e: EpicEvent| hostile(&e);
    execute(
        &f.store,
        &f.project,
        command,
        EpicSettings {
            source: ModelSource::Live(&f.model),
            record: None,
            ask: None,
            on_event: Some(&on_event),
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
    )
    .await
}

fn ended(e: &EpicEvent, story: &str, phase: Phase) -> bool {
    matches!(e, EpicEvent::PhaseEnded { story: s, phase: p, .. } if s == story && *p == phase)
}

/// A sprint status in which every story of epic 1 is done.
fn forged_sprint(f: &Fixture) -> String {
    f.sprint()
        .replace("epic-1: backlog", "epic-1: done")
        .replace("epic-1: in-progress", "epic-1: done")
        .replace(
            "1-2-user-authentication: backlog",
            "1-2-user-authentication: done",
        )
        .replace("1-3-password-reset: backlog", "1-3-password-reset: done")
}

fn redirect_config(f: &Fixture, to: &str) {
    let path = f.file("_bmad/bmm/config.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "{project-root}/_bmad-output/implementation-artifacts",
        &format!("{{project-root}}/{to}"),
    );
    std::fs::write(&path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmad_config_redirected_to_a_forged_folder_is_refused_not_followed() {
    let f = Fixture::new(Scenario::default());
    // The first command records the folder it works in.
    f.run(run("epic-1", Some(1))).await.unwrap();
    // The dev model's edit: a folder of its own with a forged sprint status, and BMAD's
    // configuration pointing at it.
    let forged = f.file("forged");
    std::fs::create_dir_all(&forged).unwrap();
    std::fs::write(forged.join("sprint-status.yaml"), forged_sprint(&f)).unwrap();
    redirect_config(&f, "forged");
    let before = snapshot(&forged);
    let err = f.run(run("epic-1", None)).await.unwrap_err();
    assert_eq!(err.code, "EPIC_LAYOUT_CHANGED", "{err}");
    assert!(err.message.contains("forged"), "{err}");
    assert_eq!(
        snapshot(&forged),
        before,
        "nothing was written in the forged folder"
    );
    assert!(f.sprint().contains("  1-2-user-authentication: backlog\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmad_config_changed_during_the_epic_stops_the_loop() {
    let f = Fixture::new(Scenario::default());
    let forged = f.file("forged");
    std::fs::create_dir_all(&forged).unwrap();
    std::fs::write(forged.join("sprint-status.yaml"), forged_sprint(&f)).unwrap();
    let project = f.project.clone();
    let hostile = move |e: &EpicEvent| {
        if ended(e, "1-1-project-scaffold", Phase::Dev) {
            let path = project.join("_bmad/bmm/config.yaml");
            let text = std::fs::read_to_string(&path).unwrap().replace(
                "{project-root}/_bmad-output/implementation-artifacts",
                "{project-root}/forged",
            );
            std::fs::write(&path, text).unwrap();
        }
    };
    let before = snapshot(&forged);
    let err = run_with(&f, run("epic-1", None), &hostile)
        .await
        .unwrap_err();
    assert_eq!(err.code, "EPIC_LAYOUT_CHANGED", "{err}");
    assert_eq!(snapshot(&forged), before);
    // The state says the loop stopped; the real sprint status was never marked done.
    assert_eq!(f.json(".run-epic-state.json")["status"], "paused");
    assert!(!f.sprint().contains("  1-1-project-scaffold: done\n"));
}

/// Moves the artifacts folder to `outside` and leaves a link to it in its place.
fn link_out(project: &Path, outside: &Path, keep: Option<&str>) {
    let folder = project.join(IMPL);
    match keep {
        Some(moved) => {
            baton_testkit::copy_dir(&folder, outside);
            std::fs::rename(&folder, project.join(moved)).unwrap();
        }
        None => std::fs::rename(&folder, outside).unwrap(),
    }
    std::os::unix::fs::symlink(outside, &folder).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifacts_folder_linked_out_of_the_project_is_never_followed() {
    // Before the command: refused at once.
    let f = Fixture::new(Scenario::default());
    let outside = f.tmp.path().join("outside");
    link_out(&f.project, &outside, None);
    let before = snapshot(&outside);
    let err = f.run(run("epic-1", None)).await.unwrap_err();
    assert_eq!(err.code, "EPIC_LAYOUT_INVALID", "{err}");
    assert!(err.message.contains("outside the project"), "{err}");
    let board = status(&f.project, None).unwrap_err();
    assert_eq!(board.code, "EPIC_LAYOUT_INVALID");
    assert_eq!(snapshot(&outside), before, "nothing was written outside");

    // During a phase: the orchestrator keeps the folder it opened, writes nothing through the
    // link, and stops at the next phase boundary.
    let f = Fixture::new(Scenario::default());
    let outside: PathBuf = f.tmp.path().join("outside");
    let (project, out) = (f.project.clone(), outside.clone());
    let linked = std::sync::Mutex::new(None);
    let hostile = |e: &EpicEvent| {
        if ended(e, "1-1-project-scaffold", Phase::CreateStory) {
            link_out(&project, &out, Some("moved-away"));
            *linked.lock().unwrap() = Some(snapshot(&out));
        }
    };
    let err = run_with(&f, run("epic-1", None), &hostile)
        .await
        .unwrap_err();
    assert_eq!(err.code, "EPIC_LAYOUT_CHANGED", "{err}");
    let linked = linked
        .lock()
        .unwrap()
        .take()
        .expect("the folder was linked out");
    assert_eq!(snapshot(&outside), linked, "nothing was written outside");
    let copied: Vec<(PathBuf, Vec<u8>)> = snapshot(&f.file("moved-away"))
        .into_iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n == "sprint-status.yaml"))
        .collect();
    let outside_sprint = std::fs::read_to_string(outside.join("sprint-status.yaml")).unwrap();
    assert!(
        outside_sprint.contains("  1-1-project-scaffold: backlog\n"),
        "the copy outside was not written: {outside_sprint}"
    );
    // The orchestrator went on in the folder it had opened (moved, still in the project).
    assert_eq!(copied.len(), 1);
    assert!(f.file("moved-away/.run-epic-state.json").exists());
}

/// `work` on another thread: a hang is a failure after `limit`, not a stuck test.
fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("still running after {limit:?}: it hangs or reads too much"))
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn run_blocking(f: Fixture, command: Command) -> (Fixture, Result<EpicReport, EpicError>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(f.run(command));
    (f, result)
}

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn fifos_where_the_orchestrator_reads_are_refused_not_waited_on() {
    // The story in flight's agent-state file, read when the command starts.
    let f = Fixture::new(Scenario {
        questions: vec![(
            "1-1-project-scaffold".into(),
            "dev".into(),
            1,
            "Which database?".into(),
        )],
        ..Default::default()
    });
    let (f, first) = run_blocking(f, run("epic-1", None));
    first.unwrap();
    let agent = f.impl_file("1-1-project-scaffold.agent-state.json");
    assert!(agent.exists());
    mkfifo(&agent);
    let (f, resumed) = within(LIMIT, move || run_blocking(f, Command::Resume));
    let err = resumed.unwrap_err();
    assert_eq!(err.code, "FILE_NOT_REGULAR", "{err}");
    assert!(err.message.contains("agent-state.json"), "{err}");
    // The board shows the problem on the story's card.
    let project = f.project.clone();
    let board = within(LIMIT, move || status(&project, None)).unwrap();
    let row = board.epics[0]
        .stories
        .iter()
        .find(|s| s.key == "1-1-project-scaffold")
        .unwrap();
    assert!(
        row.problem
            .as_deref()
            .unwrap_or("")
            .contains("FILE_NOT_REGULAR"),
        "{row:?}"
    );

    // The sprint status and a review verdict.
    for name in ["sprint-status.yaml", "1-1-project-scaffold.review.json"] {
        let f = Fixture::new(Scenario::default());
        mkfifo(&f.impl_file(name));
        let (f, result) = within(LIMIT, move || run_blocking(f, run("epic-1", None)));
        let project = f.project.clone();
        let board = within(LIMIT, move || status(&project, None));
        if name == "sprint-status.yaml" {
            assert_eq!(result.unwrap_err().code, "FILE_NOT_REGULAR", "{name}");
            assert_eq!(board.unwrap_err().code, "FILE_NOT_REGULAR", "{name}");
        } else {
            // A stale verdict is removed before the review runs: the epic goes on.
            let report = result.unwrap();
            assert!(!report.stories_completed.is_empty(), "{name}: {report:?}");
            board.unwrap();
        }
    }
}

#[test]
fn huge_and_crowded_agent_state_files_are_refused_by_size_and_count() {
    let f = Fixture::new(Scenario::default());
    let sparse = f.impl_file("1-1-project-scaffold.agent-state.json");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let crowded = f.impl_file("1-2-user-authentication.agent-state.json");
    let questions: Vec<serde_json::Value> = (0..100_000)
        .map(|i| serde_json::json!({"id": format!("q{i}"), "question": "x", "answer": null}))
        .collect();
    let doc = serde_json::json!({"storyKey": "1-2-user-authentication", "phase": "dev", "questions": questions});
    std::fs::write(&crowded, serde_json::to_vec(&doc).unwrap()).unwrap();
    // Under the size limit, over the count.
    let many = f.impl_file("1-3-password-reset.agent-state.json");
    let questions: Vec<serde_json::Value> = (0..1_001)
        .map(|i| serde_json::json!({"id": format!("q{i}"), "question": "x", "answer": "y"}))
        .collect();
    let doc = serde_json::json!({"storyKey": "1-3-password-reset", "phase": "dev", "questions": questions});
    std::fs::write(&many, serde_json::to_vec(&doc).unwrap()).unwrap();
    let project = f.project.clone();
    let board = within(LIMIT, move || status(&project, None)).unwrap();
    let problem = |key: &str| {
        board.epics[0]
            .stories
            .iter()
            .find(|s| s.key == key)
            .and_then(|s| s.problem.clone())
            .unwrap_or_default()
    };
    assert!(
        problem("1-1-project-scaffold").contains("FILE_TOO_LARGE"),
        "{board:?}"
    );
    assert!(
        problem("1-2-user-authentication").contains("FILE_TOO_LARGE"),
        "{board:?}"
    );
    assert!(
        problem("1-3-password-reset").contains("at most 1000"),
        "{board:?}"
    );
}
