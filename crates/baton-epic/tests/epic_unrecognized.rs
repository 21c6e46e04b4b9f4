//! Nothing in `sprint-status.yaml` is hidden or overwritten: keys outside BMAD's grammar and
//! values BMAD does not define are listed with their lines (board, dry run, report), refused by
//! name where a command names them, never written; an epic or story in such a value runs only
//! when a person says so (the loop asks in the story's agent-state file and pauses), and a
//! story the person left alone is not asked about again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::{Command, EpicOutcome, EpicReport, EpicSettings, ModelSource, Question, execute};
use baton_store::Store;
use std::path::{Path, PathBuf};
use support::player::Scenario;
use support::{Fixture, IMPL, expected_sprint, snapshot, without_last_updated};
use tokio_util::sync::CancellationToken;

fn s(x: &str) -> String {
    x.to_string()
}

fn run(epic: &str) -> Command {
    Command::Run {
        epic: s(epic),
        max_stories: None,
    }
}

fn answer(story: &str, text: &str) -> Command {
    Command::Answer {
        story: s(story),
        question: None,
        text: s(text),
    }
}

/// The sample's sprint-status with `from` replaced by `to` (each must be there).
fn edit_sprint(f: &Fixture, edits: &[(&str, &str)]) -> String {
    let path = f.impl_file("sprint-status.yaml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(&path, &text).unwrap();
    text
}

fn waiting(report: &EpicReport) -> (&str, &Question) {
    match &report.outcome {
        EpicOutcome::Waiting { story, question } => (story.as_str(), question),
        other => panic!("expected a question, got {other:?}"),
    }
}

async fn dry_run(store: &Store, project: &Path, command: Command) -> EpicReport {
    execute(
        store,
        project,
        command,
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
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_epic_is_left_alone_until_a_person_says_run() {
    let f = Fixture::new(Scenario::default());
    let original = edit_sprint(&f, &[("  epic-2: backlog", "  epic-2: blocked")]);

    // The plan says it before anything runs.
    let plan = dry_run(&f.store, &f.project, run("epic-2")).await;
    let epic = &plan.findings.not_runnable[0];
    assert_eq!(
        (epic.key.as_str(), epic.status.as_str()),
        ("epic-2", "blocked")
    );
    assert_eq!(epic.kind, "epic");
    assert!(
        epic.reason.contains("none of its stories"),
        "{}",
        epic.reason
    );
    let json = baton_epic::report::to_json(&plan);
    assert_eq!(json["notRunnable"][0]["key"], "epic-2");
    assert_eq!(json["notRunnable"][0]["line"], 39);
    assert!(json["notRunnable"][0]["reason"].is_string());

    // A live run asks before the first story, and writes nothing.
    let report = f.run(run("epic-2")).await.unwrap();
    let (story, q) = waiting(&report);
    assert_eq!(story, "2-1-create-board");
    assert!(
        q.question.starts_with("epic-2 is `blocked`"),
        "{}",
        q.question
    );
    assert!(q.question.contains("`run`") && q.question.contains("`leave`"));
    assert!(q.context.as_deref().unwrap().contains("line 39"));
    assert_eq!(f.sprint(), original);
    assert!(f.player.served().is_empty(), "no phase ran");

    // The board shows why it waits.
    let board = baton_epic::status(&f.project, None).unwrap();
    assert_eq!(board.standing, baton_epic::board::Standing::Waiting);
    assert_eq!(board.findings.not_runnable[0].key, "epic-2");
    let row = &board.epics[0].stories[0];
    assert_eq!(row.key, "2-1-create-board");
    assert!(row.questions[0].question.contains("`blocked`"));

    // `leave`: nothing changes, the loop stops, and no run is suggested.
    let left = f.run(answer("2-1-create-board", "leave")).await.unwrap();
    assert_eq!(left.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(left.runnable_left, 0);
    assert_eq!(left.phases_run, 0);
    assert_eq!(f.sprint(), original);
    let board = baton_epic::status(&f.project, None).unwrap();
    assert_ne!(board.standing, baton_epic::board::Standing::Waiting);

    // Another run asks again; an answer it cannot read is asked again, saying why.
    let again = f.run(run("epic-2")).await.unwrap();
    assert!(waiting(&again).1.question.contains("`blocked`"));
    let unclear = f
        .run(answer("2-1-create-board", "sure, why not"))
        .await
        .unwrap();
    let (_, q) = waiting(&unclear);
    assert!(
        q.context.as_deref().unwrap().contains("`sure, why not`"),
        "{q:?}"
    );
    assert_eq!(f.sprint(), original);

    // `run`: the epic becomes in-progress and its stories run to done.
    let done = f.run(answer("2-1-create-board", "run")).await.unwrap();
    assert_eq!(done.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(
        without_last_updated(&f.sprint()),
        without_last_updated(&expected_sprint(
            &original,
            &[
                ("epic-2", "done"),
                ("2-1-create-board", "done"),
                ("2-2-move-task", "done")
            ]
        ))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_story_in_a_value_bmad_does_not_define_is_asked_about_and_skip_is_remembered() {
    let f = Fixture::new(Scenario::default());
    let original = edit_sprint(
        &f,
        &[("  2-2-move-task: backlog", "  2-2-move-task: superseded")],
    );
    let report = f.run(run("epic-2")).await.unwrap();
    assert_eq!(report.stories_completed, ["2-1-create-board"]);
    let (story, q) = waiting(&report);
    assert_eq!(story, "2-2-move-task");
    assert!(q.question.starts_with("2-2-move-task is `superseded`"));
    assert!(f.sprint().contains("  2-2-move-task: superseded\n"));
    let board = baton_epic::status(&f.project, None).unwrap();
    assert_eq!(board.standing, baton_epic::board::Standing::Waiting);
    assert_eq!(board.current_story.as_deref(), Some("2-2-move-task"));

    // `skip`: left as it is; the epic is not done, and nothing is left to run.
    let skipped = f.run(answer("2-2-move-task", "skip")).await.unwrap();
    assert_eq!(skipped.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(skipped.runnable_left, 0);
    let odd = &skipped.findings.not_runnable[0];
    assert_eq!(odd.key, "2-2-move-task");
    assert!(odd.reason.contains("as you answered"), "{}", odd.reason);
    assert!(f.sprint().contains("  2-2-move-task: superseded\n"));
    assert!(f.sprint().contains("  epic-2: in-progress\n"));

    // The answer is remembered while the value stays: no question, no phase.
    let served = f.player.served().len();
    let again = f.run(run("epic-2")).await.unwrap();
    assert_eq!(again.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(again.phases_run, 0);
    assert_eq!(f.player.served().len(), served);
    let board = baton_epic::status(&f.project, None).unwrap();
    assert!(
        board.findings.not_runnable[0]
            .reason
            .contains("as you answered")
    );

    // Every other line is as it was (the run's own values and last_updated aside).
    assert_eq!(
        without_last_updated(&f.sprint()),
        without_last_updated(&expected_sprint(
            &original,
            &[("epic-2", "in-progress"), ("2-1-create-board", "done")]
        ))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_at_the_terminal_sets_a_status_and_the_story_runs_from_there() {
    let f = Fixture::new(Scenario::default());
    edit_sprint(
        &f,
        &[(
            "  1-1-project-scaffold: backlog",
            "  1-1-project-scaffold: on-hold",
        )],
    );
    let mut asked: Vec<String> = Vec::new();
    let mut answers = vec!["later", "backlog"].into_iter();
    let mut ask = |_: &str, q: &Question| {
        asked.push(format!(
            "{}|{}",
            q.question,
            q.context.clone().unwrap_or_default()
        ));
        answers.next().map(str::to_string)
    };
    let report = execute(
        &f.store,
        &f.project,
        Command::Story {
            key: s("1-1-project-scaffold"),
        },
        EpicSettings {
            source: ModelSource::Live(&f.model),
            record: None,
            ask: Some(&mut ask),
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(report.stories_completed, ["1-1-project-scaffold"]);
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].starts_with("1-1-project-scaffold is `on-hold`"));
    assert!(asked[1].contains("`later` was none of"), "{}", asked[1]);
    assert!(f.sprint().contains("  1-1-project-scaffold: done\n"));
    assert!(f.player.served().iter().any(|p| p == "create-story"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrecognized_keys_and_odd_values_are_listed_and_byte_identical_after_a_run() {
    let f = Fixture::new(Scenario::default());
    let original = edit_sprint(
        &f,
        &[
            (
                "  epic-1-retrospective: optional\n",
                "  epic-1-retrospective: optional\n  epic-1-retro-item-1: open   # bmad-loop\n  1.5-1-audit-log: backlog   # outside the grammar\n",
            ),
            (
                "  epic-2-retrospective: optional",
                "  epic-2-retrospective: 'completed'\n\n  epic-3a: in-progress\n  3a-1-perch-sensor: \"ready-for-dev\"\n  15-TD-1-dock-cleanup: backlog\n  tech-01-log-rotation: done\n  epic-4: docs/archive/sprint-status_epics1to3.yaml\n  4-1-x: \"In progress\"\n  4-2-y: awaiting-operator\n  epic-5: blocked\n  5-1-z: done",
            ),
        ],
    );
    let report = f.run(run("epic-2")).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(
        without_last_updated(&f.sprint()),
        without_last_updated(&expected_sprint(
            &original,
            &[
                ("epic-2", "done"),
                ("2-1-create-board", "done"),
                ("2-2-move-task", "done")
            ]
        ))
    );
    // The report of the run names every key outside the grammar, with its line.
    let line_of = |key: &str| {
        original
            .lines()
            .position(|l| l.starts_with(&format!("  {key}:")))
            .unwrap()
            + 1
    };
    let unrecognized: Vec<(&str, usize)> = report
        .findings
        .unrecognized
        .iter()
        .map(|u| (u.key.as_str(), u.line))
        .collect();
    let expected: Vec<(&str, usize)> = [
        "1.5-1-audit-log",
        "epic-3a",
        "3a-1-perch-sensor",
        "15-TD-1-dock-cleanup",
        "tech-01-log-rotation",
    ]
    .into_iter()
    .map(|k| (k, line_of(k)))
    .collect();
    assert_eq!(unrecognized, expected);
    assert_eq!(report.findings.unrecognized[2].status, "ready-for-dev");
    // Epic 2's legacy retrospective value is named as mapped.
    assert_eq!(report.findings.legacy_mapped[0].key, "epic-2-retrospective");
    assert_eq!(report.findings.legacy_mapped[0].mapped_to, "done");

    // The board (of the state file's epic) still names every other epic's odd values.
    let board = baton_epic::status(&f.project, None).unwrap();
    let odd: Vec<(&str, &str)> = board
        .findings
        .not_runnable
        .iter()
        .map(|n| (n.key.as_str(), n.status.as_str()))
        .collect();
    assert_eq!(
        odd,
        [
            ("epic-4", "docs/archive/sprint-status_epics1to3.yaml"),
            ("4-1-x", "In progress"),
            ("4-2-y", "awaiting-operator"),
            ("epic-5", "blocked")
        ]
    );
    assert!(board.findings.not_runnable[0].reason.contains("file path"));
    assert!(
        board.findings.not_runnable[1]
            .reason
            .contains("`in-progress`")
    );
    assert!(board.findings.not_runnable[2].reason.contains("bmad-loop"));
    assert_eq!(board.findings.retro_items[0].key, "epic-1-retro-item-1");
    assert_eq!(
        board.findings.retro_items[0].line,
        line_of("epic-1-retro-item-1")
    );
    let json = serde_json::to_value(&board).unwrap();
    assert_eq!(json["unrecognized"][1]["key"], "epic-3a");
    assert_eq!(json["unrecognized"][1]["status"], "in-progress");
    assert_eq!(json["unrecognized"][1]["line"], line_of("epic-3a"));
    assert_eq!(json["notRunnable"][2]["status"], "awaiting-operator");
    assert_eq!(json["legacyMapped"][0]["mappedTo"], "done");
    assert_eq!(json["retroItems"][0]["status"], "open");

    // A story in such a value is asked about before anything is written.
    let before = f.sprint();
    let report = f.run(run("epic-4")).await.unwrap();
    let (story, q) = waiting(&report);
    assert_eq!(story, "4-1-x");
    assert!(q.question.starts_with("4-1-x is `In progress`"));
    assert_eq!(f.sprint(), before);
    // A blocked epic is never raised to done, even with every story done; nothing to run.
    let report = f.run(answer("4-1-x", "skip")).await.unwrap();
    assert_eq!(waiting(&report).0, "4-2-y");
    let report = f.run(run("epic-5")).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(report.runnable_left, 0);
    assert_eq!(f.sprint(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_outside_the_grammar_are_refused_by_name_with_their_line() {
    let f = Fixture::new(Scenario::default());
    let text = edit_sprint(
        &f,
        &[(
            "  epic-2-retrospective: optional",
            "  epic-2-retrospective: optional\n  epic-3a: backlog\n  3a-1-perch-sensor: backlog",
        )],
    );
    let line = |key: &str| {
        text.lines()
            .position(|l| l.starts_with(&format!("  {key}:")))
            .unwrap()
            + 1
    };
    let before = snapshot(&f.project);
    for (command, key) in [
        (run("3a"), "epic-3a"),
        (run("epic-3a"), "epic-3a"),
        (
            Command::Story {
                key: s("3a-1-perch-sensor"),
            },
            "3a-1-perch-sensor",
        ),
    ] {
        let e = f.run(command).await.unwrap_err();
        assert_eq!(e.code, "EPIC_KEY_OUTSIDE_GRAMMAR");
        assert!(e.is_usage());
        assert!(
            e.message.contains(&format!(
                "the key {key} is in {IMPL}/sprint-status.yaml line {} but outside BMAD's key grammar",
                line(key)
            )),
            "{}",
            e.message
        );
        assert!(!e.message.contains("has no story"));
        assert!(
            e.hint
                .unwrap()
                .contains("epic-N, epic-N-retrospective and N-M-slug")
        );
    }
    let e = baton_epic::status(&f.project, Some("3a")).unwrap_err();
    assert_eq!(e.code, "EPIC_KEY_OUTSIDE_GRAMMAR");
    // Not in the file: the grammar, still.
    let e = f.run(run("2.5")).await.unwrap_err();
    assert_eq!(e.code, "EPIC_ID_INVALID");
    assert!(e.hint.unwrap().contains("N-M-slug"));
    assert_eq!(snapshot(&f.project), before);

    // A file whose keys are all outside the grammar says so.
    std::fs::write(
        f.impl_file("sprint-status.yaml"),
        "development_status:\n  epic-8a: in-progress\n  8a-01-intake: backlog\n",
    )
    .unwrap();
    let board = baton_epic::status(&f.project, None).unwrap();
    assert!(board.epics.is_empty());
    assert_eq!(board.findings.unrecognized.len(), 2);
    assert!(board.findings.warnings[0].contains("none of the 2 keys"));
    let e = f.run(run("8")).await.unwrap_err();
    assert_eq!(e.code, "EPIC_NOT_FOUND");
    assert!(
        e.hint
            .unwrap()
            .contains("2 keys are outside BMAD's key grammar")
    );
}

/// A copy of a generation fixture, with the played model on loopback.
fn generation(name: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join(name);
    baton_testkit::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/generations/{name}")),
        &project,
    );
    let store = Store::new(tmp.path().join("home"));
    let player = support::player::Player::start(&project, Scenario::default());
    let model = baton_llm::HttpChatModel::new(baton_llm::LlmConfig {
        base_url: player.base_url(),
        model: Some("played".into()),
        stream: false,
        max_retries: 0,
        retry_base_delay: std::time::Duration::from_millis(1),
        ..baton_llm::LlmConfig::default()
    })
    .unwrap();
    Fixture {
        tmp,
        project,
        store,
        player,
        model,
    }
}

/// `(key, status, line)` of each entry, for comparing with the file.
fn listed<'a>(
    items: impl Iterator<Item = (&'a str, &'a str, usize)>,
) -> Vec<(String, String, usize)> {
    items
        .map(|(k, s, l)| (k.to_string(), s.to_string(), l))
        .collect()
}

/// `(key, status, line)` as the sprint-status file of `f` has them (`sprint` is its path).
fn in_file(f: &Fixture, sprint: &str, keys: &[&str]) -> Vec<(String, String, usize)> {
    let text = f.read(sprint);
    keys.iter()
        .map(|key| {
            let (n, line) = text
                .lines()
                .enumerate()
                .find(|(_, l)| l.trim_start().starts_with(&format!("{key}:")))
                .unwrap_or_else(|| panic!("{key} in {sprint}"));
            let value = line.split_once(':').unwrap().1;
            let value = value
                .split(" #")
                .next()
                .unwrap()
                .trim()
                .trim_matches(['"', '\'']);
            (key.to_string(), value.to_string(), n + 1)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_generation_reports_what_it_will_not_run_with_its_line() {
    // (fixture, its sprint-status, unrecognized, not runnable, legacy values, retro items)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
    );
    let cases: [Case; 5] = [
        (
            "f1-bmad612",
            "delivery/impl/sprint-status.yaml",
            &[],
            &["epic-2"],
            &[],
            &[],
        ),
        (
            "f2-bmad60",
            "_bmad-output/implementation-artifacts/sprint-status.yaml",
            &["2.5-1-frost-alarm"],
            &["2-3-harvest-calendar"],
            &[],
            &[],
        ),
        (
            "f3-dotbmad",
            "docs/sprint-artifacts/sprint-status.yaml",
            &[
                "epic-2a",
                "2a-1-perch-sensor",
                "2a-2-feeding-log",
                "epic-2a-retrospective",
            ],
            &["epic-3"],
            &["epic-1-retrospective"],
            &[],
        ),
        (
            "f4-alpha",
            "docs/sprint-status.yaml",
            &[],
            &["1-4-night-roost"],
            &["epic-1", "1-3-mudflat-survey", "epic-1-retrospective"],
            &[],
        ),
        (
            "f5-bare",
            "docs/sprint-artifacts/sprint-status.yaml",
            &["15-TD-1-dock-cleanup", "tech-01-log-rotation"],
            &["1-4-foghorn"],
            &[],
            &["epic-1-retro-item-1"],
        ),
    ];
    for (name, sprint, unrecognized, odd, legacy, items) in cases {
        let f = generation(name);
        let board = baton_epic::status(&f.project, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = &board.findings;
        assert_eq!(
            listed(
                got.unrecognized
                    .iter()
                    .map(|u| (u.key.as_str(), u.status.as_str(), u.line))
            ),
            in_file(&f, sprint, unrecognized),
            "{name}: unrecognized"
        );
        assert_eq!(
            listed(
                got.not_runnable
                    .iter()
                    .map(|n| (n.key.as_str(), n.status.as_str(), n.line))
            ),
            in_file(&f, sprint, odd),
            "{name}: not runnable"
        );
        assert!(got.not_runnable.iter().all(|n| !n.reason.is_empty()));
        assert_eq!(
            listed(
                got.legacy_mapped
                    .iter()
                    .map(|m| (m.key.as_str(), m.status.as_str(), m.line))
            ),
            in_file(&f, sprint, legacy),
            "{name}: legacy"
        );
        assert_eq!(
            listed(
                got.retro_items
                    .iter()
                    .map(|i| (i.key.as_str(), i.status.as_str(), i.line))
            ),
            in_file(&f, sprint, items),
            "{name}: retro items"
        );
        assert!(got.warnings.is_empty(), "{name}: {:?}", got.warnings);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_epic_of_a_real_layout_is_left_alone() {
    // BMAD 6.12: epic-2 is blocked; its story is ready for dev.
    let f = generation("f1-bmad612");
    let sprint = "delivery/impl/sprint-status.yaml";
    let before = f.read(sprint);
    let report = f.run(run("epic-2")).await.unwrap();
    let (story, q) = waiting(&report);
    assert_eq!(story, "2-1-hanging-hook");
    assert!(
        q.question.starts_with("epic-2 is `blocked`"),
        "{}",
        q.question
    );
    assert_eq!(f.read(sprint), before);
    assert!(f.player.served().is_empty());

    // `.bmad/`: the same for epic-3, and its letter epic is refused by name.
    let f = generation("f3-dotbmad");
    let sprint = "docs/sprint-artifacts/sprint-status.yaml";
    let before = f.read(sprint);
    let report = f.run(run("3")).await.unwrap();
    assert_eq!(waiting(&report).0, "3-1-migration-map");
    let e = f.run(run("2a")).await.unwrap_err();
    assert_eq!(e.code, "EPIC_KEY_OUTSIDE_GRAMMAR");
    assert!(
        e.message.contains(&format!("{sprint} line 10")),
        "{}",
        e.message
    );
    let e = f
        .run(Command::Story {
            key: s("2a-1-perch-sensor"),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, "EPIC_KEY_OUTSIDE_GRAMMAR");
    assert_eq!(f.read(sprint), before);
    assert!(f.player.served().is_empty());
}
