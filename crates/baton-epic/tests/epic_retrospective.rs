//! `[autopilot] retrospective = true`: once the last story of an epic is approved, the loop
//! runs the project's installed `bmad-retrospective` skill once, as a recorded, resumable task
//! run; the document it is told to write decides, and the loop alone marks
//! `epic-N-retrospective: done` in sprint-status.yaml. A BMAD 6.12-shaped project (the lantern
//! fixture) with a retrospective skill written here; the played model stands in for the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use baton_epic::{Command, EpicError, EpicEvent, EpicOutcome, EpicSettings, ModelSource, execute};
use baton_llm::HttpChatModel;
use baton_store::{RunKind, Store};
use std::path::{Path, PathBuf};
use support::player::{Player, Scenario};
use tokio_util::sync::CancellationToken;

const IMPL: &str = "delivery/impl";
const RETRO: &str = "epic-1-retrospective";

/// A retrospective skill in BMAD's installed shape (our own words).
const SKILL: &str = "---\nname: bmad-retrospective\ndescription: 'Looks back on a finished epic from the evidence it left and writes a retrospective. Use when asked to retro an epic. Supports -H/--headless'\n---\n\n# Lantern retrospective\n\nLANTERN-RETRO-MARKER: read the epic's stories and specs in `{implementation_artifacts}`,\nwrite `{implementation_artifacts}/epic-<N>-retro-<date>.md` with its findings and an\nAssumptions section, then mark `epic-<N>-retrospective: done` in sprint-status.yaml.\n";

struct World {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    store: Store,
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/generations/f1-bmad612")
}

impl World {
    /// Lantern with one story left in epic 1 (1-2, built but not reviewed), the retrospective
    /// skill installed when `skill`, and `retrospective = option`.
    fn new(skill: bool, option: bool) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        baton_testkit::copy_dir(&fixture(), &project);
        std::fs::write(
            project.join("baton.toml"),
            format!(
                "[autopilot]\nimplementation_artifacts = \"{IMPL}\"\nretrospective = {option}\n"
            ),
        )
        .unwrap();
        let store = Store::new(tmp.path().join("home"));
        let w = World {
            _tmp: tmp,
            project,
            store,
        };
        if skill {
            let dir = w.project.join(".claude/skills/bmad-retrospective");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("SKILL.md"), SKILL).unwrap();
            std::fs::write(
                dir.join("customize.toml"),
                "[workflow]\nactivation_steps_prepend = []\nactivation_steps_append = []\npersistent_facts = []\non_complete = \"\"\n",
            )
            .unwrap();
        }
        let sprint = w
            .read(&sprint_rel())
            .replace("1-2a-chimney-gasket: backlog", "1-2a-chimney-gasket: done")
            .replace("1-3-oil-gauge: backlog", "1-3-oil-gauge: done");
        w.write(&sprint_rel(), &sprint);
        let spec = format!("{IMPL}/spec-1-2-glass-chimney.md");
        let text = w
            .read(&spec)
            .replace("status: 'in-review'", "status: 'in-progress'");
        w.write(&spec, &text);
        w
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.project.join(rel), text).unwrap();
    }

    async fn run_with(
        &self,
        model: &HttpChatModel,
        command: Command,
        dry_run: bool,
        cancel: CancellationToken,
        on_event: Option<&(dyn Fn(EpicEvent) + Send + Sync)>,
    ) -> Result<baton_epic::EpicReport, EpicError> {
        baton_epic::preflight(&self.project, &command)?;
        execute(
            &self.store,
            &self.project,
            command,
            EpicSettings {
                source: ModelSource::Live(model),
                record: None,
                ask: None,
                on_event,
                cancel,
                dry_run,
                budget: Default::default(),
            },
        )
        .await
    }

    async fn run(
        &self,
        model: &HttpChatModel,
        command: Command,
    ) -> Result<baton_epic::EpicReport, EpicError> {
        self.run_with(model, command, false, CancellationToken::new(), None)
            .await
    }

    fn progress(&self) -> serde_json::Value {
        serde_json::from_str(&self.read(&format!("{IMPL}/.baton-epic-progress.json"))).unwrap()
    }

    /// The retrospective's runs in baton's progress record.
    fn retro_runs(&self) -> Vec<serde_json::Value> {
        self.progress()["retrospective"]["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn status_line(&self, key: &str) -> String {
        self.read(&sprint_rel())
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}:")))
            .unwrap()
            .trim()
            .to_string()
    }

    /// The retrospective documents in the artifacts folder.
    fn documents(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.project.join(IMPL))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("epic-1-retro-") && n.ends_with(".md"))
            .collect();
        names.sort();
        names
    }
}

fn sprint_rel() -> String {
    format!("{IMPL}/sprint-status.yaml")
}

fn run_epic() -> Command {
    Command::Run {
        epic: "1".into(),
        max_stories: None,
    }
}

fn model(player: &Player) -> HttpChatModel {
    baton_llm::testing::played_model(player.base_url()).unwrap()
}

/// The number of retrospective task runs the model was asked to start (first turns).
fn retro_starts(player: &Player) -> usize {
    player
        .method_requests("retrospective")
        .iter()
        .filter(|r| !r.contains("\"role\":\"tool\""))
        .count()
}

/// sprint-status.yaml with the loop's values set and nothing else changed but `last_updated`.
fn expected_sprint(before: &str, retro: &str) -> String {
    support::without_last_updated(&support::expected_sprint(
        before,
        &[
            ("epic-1", "done"),
            ("1-2-glass-chimney", "done"),
            (RETRO, retro),
        ],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_story_approved_runs_the_retrospective_once_and_the_loop_marks_it_done() {
    let w = World::new(true, true);
    let player = Player::start(&w.project, Scenario::default());
    let m = model(&player);
    let before = w.read(&sprint_rel());

    // The dry run says it will run, and what it is told to write.
    let plan = w
        .run_with(&m, run_epic(), true, CancellationToken::new(), None)
        .await
        .unwrap();
    let retro = plan
        .retrospective
        .clone()
        .expect("the plan names the retrospective");
    assert!(retro.will_run, "{retro:?}");
    assert_eq!(retro.key, RETRO);
    assert_eq!(retro.status.as_deref(), Some("optional"));
    assert_eq!(retro.skill, ".claude/skills/bmad-retrospective");
    let today: String = baton_store::time::now_rfc3339().chars().take(10).collect();
    let document = format!("{IMPL}/epic-1-retro-{today}.md");
    assert_eq!(retro.document, document);
    let json = baton_epic::report::to_json(&plan);
    assert_eq!(json["retrospective"]["willRun"], true, "{json}");
    assert_eq!(
        json["retrospective"]["document"],
        document.as_str(),
        "{json}"
    );
    assert_eq!(player.requests(), 0);

    let report = w.run(&m, run_epic()).await.unwrap();
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    assert_eq!(report.stories_completed, ["1-2-glass-chimney"]);

    // Once, after the last story's review, with the project's skill and the exact name.
    assert_eq!(retro_starts(&player), 1);
    let served = player.served();
    let last_review = served.iter().rposition(|p| p == "code-review").unwrap();
    let first_retro = served.iter().position(|p| p == "retrospective").unwrap();
    assert!(last_review < first_retro, "{served:?}");
    let request = &player.method_requests("retrospective")[0];
    for marker in [
        "LANTERN-RETRO-MARKER",
        "- phase: retrospective",
        "- storyKey: epic-1-retrospective",
        "`-H 1`",
        &format!("Retrospective document to write: `@project/{document}`"),
        "Nobody is present",
    ] {
        assert!(request.contains(marker), "{marker} missing from {request}");
    }

    // The document, the loop's own write of the key, and nothing else of the model's: the
    // action item its sprint-status write appended is undone.
    assert!(
        w.read(&document)
            .contains("# Retrospective of epic-1-retrospective")
    );
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: done");
    let after = w.read(&sprint_rel());
    assert!(
        !after.contains("Played: keep the review findings short"),
        "{after}"
    );
    assert_eq!(
        support::without_last_updated(&after),
        expected_sprint(&before, "done")
    );

    // A recorded task run, completed, named for the epic.
    let runs = w.retro_runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["result"], "completed");
    let project = w.store.project(&w.project).unwrap();
    let meta = project.get_run(runs[0]["runId"].as_str().unwrap()).unwrap();
    assert_eq!(meta.kind, RunKind::Task);
    assert_eq!(
        meta.workflow_ref,
        "epic-1/epic-1-retrospective/retrospective.1"
    );

    // Done in sprint-status: never run again.
    let again = w.run(&m, run_epic()).await.unwrap();
    assert_eq!(again.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(retro_starts(&player), 1);
    assert!(!again.retrospective.unwrap().will_run);
    assert_eq!(w.documents().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrospective_that_writes_nothing_stops_the_epic_and_resume_runs_it_again() {
    let w = World::new(true, true);
    let before = w.read(&sprint_rel());
    let lazy = Player::start(
        &w.project,
        Scenario {
            lazy: vec![(RETRO.into(), "retrospective".into())],
            ..Scenario::default()
        },
    );
    let err = w.run(&model(&lazy), run_epic()).await.unwrap_err();
    assert_eq!(err.code, "EPIC_RETROSPECTIVE_OUTPUT_MISSING", "{err:?}");
    assert!(
        err.message.contains(&format!("{IMPL}/epic-1-retro-")),
        "{err:?}"
    );
    assert!(
        err.hint
            .as_deref()
            .unwrap_or("")
            .contains("baton epic resume"),
        "{err:?}"
    );
    assert_eq!(retro_starts(&lazy), 1);
    assert!(w.documents().is_empty());
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: optional");
    let runs = w.retro_runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["result"], "missing");

    let player = Player::start(&w.project, Scenario::default());
    let report = w.run(&model(&player), Command::Resume).await.unwrap();
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    assert_eq!(retro_starts(&player), 1);
    assert_eq!(w.documents().len(), 1);
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: done");
    assert_eq!(
        support::without_last_updated(&w.read(&sprint_rel())),
        expected_sprint(&before, "done")
    );
    let runs = w.retro_runs();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_ne!(runs[0]["runId"], runs[1]["runId"]);
    assert_eq!(runs[1]["result"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrospective_stopped_mid_run_resumes_the_same_task_run() {
    let w = World::new(true, true);
    let player = Player::start(&w.project, Scenario::default());
    let m = model(&player);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    // Stopped as the retrospective's run is about to be driven (an event, not a timer).
    let on_event = move |e: EpicEvent| {
        if let EpicEvent::Note(n) = &e
            && n.starts_with("retrospective of epic-1")
            && n.contains(", run ")
        {
            stop.cancel();
        }
    };
    let first = w
        .run_with(&m, run_epic(), false, cancel, Some(&on_event))
        .await
        .unwrap();
    assert_eq!(first.outcome, EpicOutcome::Interrupted, "{first:?}");
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: optional");
    let runs = w.retro_runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let id = runs[0]["runId"].as_str().unwrap().to_string();
    assert_eq!(w.progress()["retrospective"]["run"]["runId"], id.as_str());

    let report = w.run(&m, Command::Resume).await.unwrap();
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    let runs = w.retro_runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["runId"], id.as_str());
    assert_eq!(runs[0]["result"], "completed");
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: done");
    assert_eq!(w.documents().len(), 1);
    let project = w.store.project(&w.project).unwrap();
    let made = project
        .list_runs()
        .unwrap()
        .into_iter()
        .filter(|r| r.workflow_ref.contains("/retrospective."))
        .count();
    assert_eq!(made, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_option_off_no_retrospective_runs() {
    let w = World::new(true, false);
    let player = Player::start(&w.project, Scenario::default());
    let report = w.run(&model(&player), run_epic()).await.unwrap();
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    assert!(report.retrospective.is_none());
    assert!(
        baton_epic::report::to_json(&report)
            .get("retrospective")
            .is_none()
    );
    assert!(player.method_requests("retrospective").is_empty());
    assert!(!player.method_requests("code-review").is_empty());
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: optional");
    assert!(w.documents().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_option_without_the_skill_is_refused_before_anything_is_written() {
    let w = World::new(false, true);
    let player = Player::start(&w.project, Scenario::default());
    let before = support::snapshot(&w.project);
    let refused = baton_epic::preflight(&w.project, &run_epic()).unwrap_err();
    assert_eq!(
        refused.code, "EPIC_RETROSPECTIVE_SKILL_MISSING",
        "{refused:?}"
    );
    assert!(
        refused.message.contains("bmad-retrospective"),
        "{refused:?}"
    );
    assert!(
        refused
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("retrospective = false")
    );
    // The loop itself refuses it too, before its first write.
    let err = execute(
        &w.store,
        &w.project,
        run_epic(),
        EpicSettings {
            source: ModelSource::Live(&model(&player)),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, "EPIC_RETROSPECTIVE_SKILL_MISSING", "{err:?}");
    assert_eq!(support::snapshot(&w.project), before);
    assert_eq!(player.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_epic_runs_its_retrospective_once_its_stories_are_merged() {
    let w = World::new(true, true);
    support::git(&w.project, &["init", "-q", "-b", "main"]);
    support::git(&w.project, &["add", "-A"]);
    support::git(
        &w.project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    let player = Player::start(&w.project, Scenario::default());
    let m = model(&player);
    let report = baton_epic::execute_parallel(
        &w.store,
        &w.project,
        run_epic(),
        EpicSettings {
            source: ModelSource::Live(&m),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
        Some(2),
    )
    .await;
    let report = report.unwrap();
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    assert_eq!(retro_starts(&player), 1);
    assert_eq!(w.status_line(RETRO), "epic-1-retrospective: done");
    assert_eq!(w.documents().len(), 1);
}
