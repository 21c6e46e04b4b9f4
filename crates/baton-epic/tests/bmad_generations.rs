//! Every BMAD generation's layout is found (the file, and the rule that chose it), and every
//! story file is found where that generation (or its user) keeps it: one test per fixture of
//! `tests/fixtures/generations/`, each copied into a temporary directory first.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_bmad::layout;
use baton_bmad::story_files::{Lookup, StoryFiles};
use baton_epic::board::{Board, StoryRow};
use baton_epic::{Command, EpicOutcome, EpicSettings, ModelSource, PlannedStory, execute, status};
use baton_store::Store;
use std::path::{Path, PathBuf};
use support::player::Scenario;
use support::{Fixture, IMPL};
use tokio_util::sync::CancellationToken;

/// A copy of fixture `name` in a temporary directory (nothing runs in the repository).
fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    baton_testkit::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/generations")
            .join(name),
        &project,
    );
    let project = std::fs::canonicalize(&project).unwrap();
    (tmp, project)
}

fn rows(board: &Board) -> Vec<&StoryRow> {
    board.epics.iter().flat_map(|e| &e.stories).collect()
}

fn row<'a>(board: &'a Board, key: &str) -> &'a StoryRow {
    rows(board)
        .into_iter()
        .find(|r| r.key == key)
        .unwrap_or_else(|| panic!("{key} is not on the board"))
}

fn epic_keys(board: &Board) -> Vec<&str> {
    board.epics.iter().map(|e| e.key.as_str()).collect()
}

/// The file of `key` as the finder sees it, with its declared status.
fn found(project: &Path, key: &str) -> (String, Option<String>) {
    match find(project, key) {
        Lookup::Found(f) => (f.path, f.status),
        other => panic!("{key}: expected one file, got {other:?}"),
    }
}

fn find(project: &Path, key: &str) -> Lookup {
    let layout = layout::resolve(project, None).unwrap();
    let sprint = baton_bmad::sprint::SprintStatus::load(
        &layout.file("sprint-status.yaml"),
        &layout.rel_file("sprint-status.yaml"),
    )
    .unwrap();
    StoryFiles::find(&layout, &sprint, key)
}

async fn dry_run(project: &Path, epic: &str) -> Vec<PlannedStory> {
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(home.path().join("home"));
    let report = execute(
        &store,
        project,
        Command::Run {
            epic: epic.into(),
            max_stories: None,
        },
        EpicSettings {
            source: ModelSource::Replay(PathBuf::from(".")),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: true,
            budget: Default::default(),
        },
    )
    .await
    .unwrap();
    match report.outcome {
        EpicOutcome::Planned { plan, .. } => plan,
        other => panic!("expected a plan, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f1_bmad612_the_team_layer_wins_and_specs_are_read() {
    let (_tmp, p) = fixture("f1-bmad612");
    let board = status(&p, None).unwrap();
    assert_eq!(board.sprint_status.path, "delivery/impl/sprint-status.yaml");
    assert_eq!(
        board.sprint_status.rule,
        "_bmad/custom/config.toml [modules.bmm] implementation_artifacts"
    );
    assert!(board.sprint_status.others.is_empty());
    assert_eq!(epic_keys(&board)[..2], ["epic-1", "epic-2"]);
    for key in [
        "1-1-wick-trimmer",
        "1-2-glass-chimney",
        "1-2a-chimney-gasket",
        "1-3-oil-gauge",
        "2-1-hanging-hook",
    ] {
        row(&board, key);
    }
    // The spec's status is shown beside sprint-status's.
    let chimney = row(&board, "1-2-glass-chimney");
    assert_eq!(chimney.status, "in-progress");
    assert_eq!(
        chimney.file.as_deref(),
        Some("delivery/impl/spec-1-2-glass-chimney.md")
    );
    assert_eq!(chimney.file_status.as_deref(), Some("in-review"));
    let trimmer = row(&board, "1-1-wick-trimmer");
    assert_eq!(
        trimmer.file.as_deref(),
        Some("delivery/impl/spec-1-1-wick-trimmer.md")
    );
    assert_eq!(trimmer.file_status.as_deref(), Some("done"));
    let hook = row(&board, "2-1-hanging-hook");
    assert_eq!(
        hook.file.as_deref(),
        Some("delivery/impl/2-1-hanging-hook.md")
    );
    assert_eq!(hook.file_status.as_deref(), Some("ready-for-dev"));
    assert_eq!(row(&board, "1-2a-chimney-gasket").file, None);

    // --dry-run: the spec says in-review, so the story does not start at dev; the line says why.
    // A spec a halted build marked `blocked` is said, and sprint-status decides.
    std::fs::write(
        p.join("delivery/impl/spec-1-3-oil-gauge.md"),
        "---\ntitle: 'Oil gauge'\nstatus: blocked\n---\nHalted: no gauge part.\n",
    )
    .unwrap();
    let plan = dry_run(&p, "epic-1").await;
    let gauge = plan.iter().find(|s| s.key == "1-3-oil-gauge").unwrap();
    // BMAD 6.12's pipeline starts a backlog story at build (no create-story before it).
    assert_eq!(gauge.phase.as_str(), "build");
    assert!(
        gauge
            .note
            .as_deref()
            .unwrap()
            .contains("says blocked, which is not a story status"),
        "{gauge:?}"
    );
    let chimney = plan.iter().find(|s| s.key == "1-2-glass-chimney").unwrap();
    assert_eq!(chimney.phase.as_str(), "code-review", "{chimney:?}");
    let note = chimney.note.as_deref().unwrap();
    assert!(
        note.contains("spec-1-2-glass-chimney.md says in-review"),
        "{note}"
    );
    let gasket = plan
        .iter()
        .find(|s| s.key == "1-2a-chimney-gasket")
        .unwrap();
    assert_eq!(gasket.phase.as_str(), "build");
    assert_eq!(gasket.note, None);

    // A classic story file beside the spec (create-story's, then the build's spec): the story
    // file is the story's file, and the spec further along still moves the start.
    std::fs::write(
        p.join("delivery/impl/1-2-glass-chimney.md"),
        "# Story 1.2: Glass chimney\n\nStatus: in-progress\n",
    )
    .unwrap();
    let board = status(&p, None).unwrap();
    assert_eq!(
        row(&board, "1-2-glass-chimney").file.as_deref(),
        Some("delivery/impl/1-2-glass-chimney.md")
    );
    let plan = dry_run(&p, "epic-1").await;
    let chimney = plan.iter().find(|s| s.key == "1-2-glass-chimney").unwrap();
    assert_eq!(chimney.phase.as_str(), "code-review", "{chimney:?}");
    assert!(
        chimney
            .note
            .as_deref()
            .unwrap()
            .contains("spec-1-2-glass-chimney.md says in-review"),
        "{chimney:?}"
    );

    // The personal layer beats the team's.
    std::fs::write(
        p.join("_bmad/custom/config.user.toml"),
        "[modules.bmm]\nimplementation_artifacts = \"{project-root}/delivery/mine\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(p.join("delivery/mine")).unwrap();
    std::fs::copy(
        p.join("delivery/impl/sprint-status.yaml"),
        p.join("delivery/mine/sprint-status.yaml"),
    )
    .unwrap();
    let board = status(&p, None).unwrap();
    assert_eq!(board.sprint_status.path, "delivery/mine/sprint-status.yaml");
    assert_eq!(
        board.sprint_status.rule,
        "_bmad/custom/config.user.toml [modules.bmm] implementation_artifacts"
    );
}

#[test]
fn f2_bmad60_stories_in_three_placements_and_a_foreign_story_location_ignored() {
    let (_tmp, p) = fixture("f2-bmad60");
    let board = status(&p, None).unwrap();
    let art = "_bmad-output/implementation-artifacts";
    assert_eq!(
        board.sprint_status.path,
        format!("{art}/sprint-status.yaml")
    );
    assert_eq!(
        board.sprint_status.rule,
        "_bmad/bmm/config.yaml implementation_artifacts"
    );
    // The leftover file is reported, not used.
    assert_eq!(board.sprint_status.others.len(), 1);
    assert_eq!(
        board.sprint_status.others[0].path,
        "docs/sprint-status.yaml"
    );
    assert_eq!(board.sprint_status.others[0].rule, "search: docs");
    // The absolute story_location from another machine is said and never followed.
    let notes = board.story_files.notes.join("\n");
    assert!(
        notes.contains("story_location (/home/someone-else/orchard/") && notes.contains("not used"),
        "{notes}"
    );
    assert!(
        board
            .story_files
            .searched
            .iter()
            .all(|d| !d.starts_with('/')),
        "{:?}",
        board.story_files.searched
    );
    let r = row(&board, "1-1-soil-survey");
    assert_eq!(
        r.file.as_deref(),
        Some(&*format!("{art}/1-1-soil-survey.md"))
    );
    assert_eq!(r.file_status.as_deref(), Some("done"));
    let r = row(&board, "2-1-irrigation-map");
    assert_eq!(
        r.file.as_deref(),
        Some(&*format!("{art}/stories/2-1-irrigation-map.md"))
    );
    assert_eq!(r.file_status.as_deref(), Some("review"));
    let r = row(&board, "2-2-pest-log");
    assert_eq!(r.file.as_deref(), Some(&*format!("{art}/story-2.2.md")));
    assert_eq!(r.file_status.as_deref(), Some("in-progress"));
    // A story without a file gets one in the artifacts folder, never at the foreign path.
    match find(&p, "2-3-harvest-calendar") {
        Lookup::Missing { expected } => {
            assert_eq!(expected, format!("{art}/2-3-harvest-calendar.md"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn f3_dotbmad_per_epic_folders_and_a_story_found_twice() {
    let (_tmp, p) = fixture("f3-dotbmad");
    let board = status(&p, None).unwrap();
    let art = "docs/sprint-artifacts";
    assert_eq!(
        board.sprint_status.path,
        format!("{art}/sprint-status.yaml")
    );
    assert_eq!(
        board.sprint_status.rule,
        ".bmad/bmm/config.yaml sprint_artifacts"
    );
    assert!(board.sprint_status.notes.is_empty());
    assert!(
        board.story_files.notes.is_empty(),
        "{:?}",
        board.story_files
    );
    assert_eq!(
        found(&p, "1-1-nest-camera"),
        (
            format!("{art}/stories/epic-1/1-1-nest-camera.md"),
            Some("done".into())
        )
    );
    assert_eq!(
        found(&p, "2a-1-perch-sensor"),
        (
            format!("{art}/stories/2a-1-perch-sensor.md"),
            Some("ready-for-dev".into())
        )
    );
    assert_eq!(
        found(&p, "3-1-migration-map").0,
        format!("{art}/epic-3/stories/story-3-1-migration-map.md")
    );
    match find(&p, "2a-2-feeding-log") {
        Lookup::Ambiguous(files) => {
            let mut paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
            paths.sort();
            assert_eq!(
                paths,
                [
                    format!("{art}/2a-2-feeding-log.md"),
                    format!("{art}/stories/2a-2-feeding-log.md")
                ]
            );
        }
        other => panic!("found twice must be reported: {other:?}"),
    }
    // On the board: the story's problem names both files.
    let r = row(&board, "1-1-nest-camera");
    assert_eq!(r.file_status.as_deref(), Some("done"));
    if let Some(r) = rows(&board)
        .into_iter()
        .find(|r| r.key == "2a-2-feeding-log")
    {
        let problem = r.problem.as_deref().unwrap();
        assert!(problem.contains("STORY_FILE_AMBIGUOUS"), "{problem}");
        assert_eq!(r.file, None);
    }
}

#[test]
fn f4_alpha_output_folder_and_dev_story_location() {
    let (_tmp, p) = fixture("f4-alpha");
    let board = status(&p, None).unwrap();
    assert_eq!(board.sprint_status.path, "docs/sprint-status.yaml");
    assert_eq!(
        board.sprint_status.rule,
        "bmad/bmm/config.yaml output_folder"
    );
    assert!(
        board
            .story_files
            .searched
            .contains(&"docs/stories".to_string())
    );
    assert_eq!(epic_keys(&board), ["epic-1"]);
    let r = row(&board, "1-2-tide-table");
    // The story, not its alpha context file.
    assert_eq!(r.file.as_deref(), Some("docs/stories/1-2-tide-table.md"));
    assert_eq!(r.file_status.as_deref(), Some("review"));
    let r = row(&board, "1-3-mudflat-survey");
    assert_eq!(r.file.as_deref(), Some("docs/stories/story-1.3.md"));
    assert_eq!(r.file_status.as_deref(), Some("drafted"));
    assert_eq!(
        row(&board, "1-1-wader-index").file.as_deref(),
        Some("docs/stories/1-1-wader-index.md")
    );
    assert_eq!(row(&board, "1-4-night-roost").file, None);
}

#[test]
fn f5_bare_found_by_the_search() {
    let (_tmp, p) = fixture("f5-bare");
    let board = status(&p, None).unwrap();
    let art = "docs/sprint-artifacts";
    assert_eq!(
        board.sprint_status.path,
        format!("{art}/sprint-status.yaml")
    );
    assert_eq!(board.sprint_status.rule, "search: docs/sprint-artifacts");
    assert!(board.sprint_status.notes.is_empty());
    let r = row(&board, "1-2-ticket-desk");
    assert_eq!(
        r.file.as_deref(),
        Some(&*format!("{art}/epic1/stories/1-2-ticket-desk.md"))
    );
    assert_eq!(r.file_status.as_deref(), Some("in-progress"));
    let r = row(&board, "1-3-harbour-lights");
    assert_eq!(
        r.file.as_deref(),
        Some(&*format!("{art}/1.3-harbour-lights.md"))
    );
    assert_eq!(r.file_status.as_deref(), Some("backlog"));
    assert_eq!(row(&board, "1-1-ferry-timetable").file, None);
}

#[test]
fn f5b_a_stale_config_falls_through_to_the_search_and_says_so() {
    let (_tmp, p) = fixture("f5b-stale-config");
    let board = status(&p, None).unwrap();
    assert_eq!(
        board.sprint_status.path,
        "docs/sprint-artifacts/sprint-status.yaml"
    );
    assert_eq!(board.sprint_status.rule, "search: docs/sprint-artifacts");
    assert_eq!(
        board.sprint_status.notes,
        [
            "_bmad/bmm/config.yaml implementation_artifacts names _bmad-output/implementation-artifacts/, which has no sprint-status.yaml (the folder does not exist)"
        ]
    );
    // baton.toml is the user's word: its folder is used even without the file, and refused
    // by name; the file the search would find is said.
    std::fs::write(
        p.join("baton.toml"),
        "[autopilot]\nimplementation_artifacts = \"impl\"\n",
    )
    .unwrap();
    let err = status(&p, None).unwrap_err();
    assert_eq!(err.code, "SPRINT_STATUS_MISSING");
    assert!(err.message.contains("impl/sprint-status.yaml"), "{err}");
    let l = layout::resolve(&p, Some("impl")).unwrap();
    assert_eq!(
        l.source.rule,
        "baton.toml [autopilot] implementation_artifacts"
    );
    assert_eq!(
        l.source.others[0].path,
        "docs/sprint-artifacts/sprint-status.yaml"
    );
}

#[test]
fn f5c_a_pre_template_sprint_file_is_refused_naming_its_shape() {
    let (_tmp, p) = fixture("f5c-pre-template");
    let err = status(&p, None).unwrap_err();
    assert_eq!(err.code, "SPRINT_STATUS_INVALID");
    assert!(
        err.message.starts_with("docs/sprint-status.yaml (line 3)"),
        "{err}"
    );
    assert!(
        err.message.contains("before BMAD's sprint-status template"),
        "{err}"
    );
    assert!(err.message.contains("`sprints:`"), "{err}");
    assert!(err.hint.unwrap().contains("sprint-planning"));
}

#[test]
fn a_bmad_config_value_outside_the_project_is_passed_over_and_said() {
    let (_tmp, p) = fixture("f5-bare");
    std::fs::create_dir_all(p.join(".bmad/bmm")).unwrap();
    std::fs::write(
        p.join(".bmad/bmm/config.yaml"),
        "sprint_artifacts: /Users/someone/kestrel/docs/sprint-artifacts\noutput_folder: '{config_source}:sprint_artifacts'\n",
    )
    .unwrap();
    let board = status(&p, None).unwrap();
    assert_eq!(board.sprint_status.rule, "search: docs/sprint-artifacts");
    let notes = board.sprint_status.notes.join("\n");
    assert!(
        notes.contains(".bmad/bmm/config.yaml sprint_artifacts (/Users/someone/kestrel/docs/sprint-artifacts) is outside the project"),
        "{notes}"
    );
    assert!(
        notes.contains(".bmad/bmm/config.yaml output_folder"),
        "{notes}"
    );
}

/// The sample project with story 1-1 kept in `stories/` (ready for dev) as BMAD 6.0 projects
/// with a `story_location` do.
fn sample_with_story_in_stories(f: &Fixture) -> PathBuf {
    let sprint = f.impl_file("sprint-status.yaml");
    let text = std::fs::read_to_string(&sprint).unwrap().replace(
        "1-1-project-scaffold: backlog",
        "1-1-project-scaffold: ready-for-dev",
    );
    assert!(text.contains("1-1-project-scaffold: ready-for-dev"));
    std::fs::write(&sprint, text).unwrap();
    let story = f.impl_file("stories/1-1-project-scaffold.md");
    std::fs::create_dir_all(story.parent().unwrap()).unwrap();
    std::fs::write(
        &story,
        "# Story 1.1: Project scaffold\n\nStatus: ready-for-dev\n\n## Story\n\nAs a developer, I want a scaffold.\n",
    )
    .unwrap();
    story
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_phases_get_the_real_story_file_and_the_output_check_looks_there() {
    let f = Fixture::new(Scenario::default());
    let story = sample_with_story_in_stories(&f);
    let report = f
        .run(Command::Story {
            key: "1-1-project-scaffold".into(),
        })
        .await
        .unwrap();
    assert!(
        matches!(report.outcome, EpicOutcome::Done { .. }),
        "{:?}",
        report.outcome
    );
    // validate and dev edited the file where it is; no second copy was made.
    let text = std::fs::read_to_string(&story).unwrap();
    assert!(text.contains("### Validation"), "{text}");
    assert!(!f.impl_file("1-1-project-scaffold.md").exists());
    assert!(f.sprint().contains("1-1-project-scaffold: done"));
    // The model was given the project-relative path, never a host path.
    let runs = baton_epic::board::phase_runs(&f.project);
    let project = f.store.project(&f.project).unwrap();
    for r in &runs {
        let state = project.state_file(&r.run_id).read().unwrap().doc.to_value();
        assert_eq!(
            state["variables"]["storyFile"],
            format!("{IMPL}/stories/1-1-project-scaffold.md"),
            "{}",
            r.phase.as_str()
        );
    }
    assert!(!runs.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_story_found_twice_stops_before_any_phase_runs() {
    let f = Fixture::new(Scenario::default());
    sample_with_story_in_stories(&f);
    let before = f.sprint();
    std::fs::write(
        f.impl_file("1-1-project-scaffold.md"),
        "# Story 1.1\n\nStatus: ready-for-dev\n",
    )
    .unwrap();
    let err = f
        .run(Command::Story {
            key: "1-1-project-scaffold".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code, "STORY_FILE_AMBIGUOUS", "{err}");
    assert!(
        err.message
            .contains(&format!("{IMPL}/1-1-project-scaffold.md")),
        "{err}"
    );
    assert!(
        err.message
            .contains(&format!("{IMPL}/stories/1-1-project-scaffold.md")),
        "{err}"
    );
    assert!(baton_epic::board::phase_runs(&f.project).is_empty());
    assert_eq!(f.sprint(), before, "sprint-status.yaml was not touched");
}

/// `f()` on another thread, failing the test if it has not returned within 30 s (a FIFO read
/// without O_NONBLOCK would block forever).
fn within_30s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("blocked on a file another tool or the model wrote")
}

fn mkfifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

#[test]
fn a_story_file_that_is_a_fifo_a_symlink_out_or_huge_is_found_but_never_read() {
    let story = "_bmad-output/implementation-artifacts/stories/2-1-irrigation-map.md";

    // A FIFO: the board comes back, the file is known, its status is not taken from it.
    let (_tmp, p) = fixture("f2-bmad60");
    mkfifo(&p.join(story));
    let q = p.clone();
    let board = within_30s(move || status(&q, None).unwrap());
    assert_eq!(row(&board, "2-1-irrigation-map").file_status, None);
    match find(&p, "2-1-irrigation-map") {
        // Not a regular file: not a story file (or known with a problem), never a status.
        Lookup::Found(f) => assert!(f.status.is_none() && f.problem.is_some(), "{f:?}"),
        Lookup::Missing { .. } => {}
        other => panic!("{other:?}"),
    }

    // A symlink out of the project whose target claims `done`: never followed.
    let (tmp, p) = fixture("f2-bmad60");
    let outside = tmp.path().join("outside.md");
    std::fs::write(&outside, "Status: done\n").unwrap();
    std::fs::remove_file(p.join(story)).unwrap();
    std::os::unix::fs::symlink(&outside, p.join(story)).unwrap();
    let board = status(&p, None).unwrap();
    assert_ne!(
        row(&board, "2-1-irrigation-map").file_status.as_deref(),
        Some("done")
    );

    // A huge file (past the read limit): its status is not read, nothing fails.
    let (_tmp, p) = fixture("f2-bmad60");
    // Sparse: the size is what matters, and a CI machine's disk can be nearly full.
    std::fs::write(p.join(story), b"Status: done\n").unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(p.join(story))
        .unwrap()
        .set_len(64 * 1024 * 1024)
        .unwrap();
    let board = status(&p, None).unwrap();
    assert_eq!(row(&board, "2-1-irrigation-map").file_status, None);
}

#[test]
fn a_bmad_config_layer_that_is_a_fifo_does_not_hang_the_search() {
    let (_tmp, p) = fixture("f1-bmad612");
    mkfifo(&p.join("_bmad/custom/config.toml"));
    let q = p.clone();
    // Refused with a located error or passed over: either way it returns.
    let _ = within_30s(move || layout::resolve(&q, None).map(|l| l.rel_file("sprint-status.yaml")));
}
