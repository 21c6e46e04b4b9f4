//! The project's installed BMAD method runs as the epic's phases: a BMAD 6.12-shaped project's
//! `bmad-build-auto` skill builds the story (its rendered text, with the customization layers,
//! is what the model gets; the spec's status it sets is what the loop reads), its
//! `bmad-code-review` skill reviews it; a 6.0-shaped project's classic `dev-story` and
//! `code-review` workflows (`workflow.yaml` + `instructions.xml`) do the same. Each phase is a
//! recorded, resumable task run. The played model stands in for the coding model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use baton_epic::{Command, EpicEvent, EpicOutcome, EpicSettings, ModelSource, execute};
use baton_llm::HttpChatModel;
use baton_store::{RunKind, Store};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use support::player::{Player, Scenario};
use tokio_util::sync::CancellationToken;

const F1_IMPL: &str = "delivery/impl";
const F2_IMPL: &str = "_bmad-output/implementation-artifacts";

struct World {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    store: Store,
    player: Player,
    model: HttpChatModel,
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/generations")
        .join(name)
}

impl World {
    fn new(generation: &str, impl_dir: &str, scenario: Scenario) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        baton_testkit::copy_dir(&fixture(generation), &project);
        // Named here so these tests do not depend on how the folder is found.
        std::fs::write(
            project.join("baton.toml"),
            format!("[autopilot]\nimplementation_artifacts = \"{impl_dir}\"\n"),
        )
        .unwrap();
        let store = Store::new(tmp.path().join("home"));
        let player = Player::start(&project, scenario);
        let model = baton_llm::testing::played_model(player.base_url()).unwrap();
        World {
            _tmp: tmp,
            project,
            store,
            player,
            model,
        }
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.project.join(rel), text).unwrap();
    }

    async fn run(
        &self,
        command: Command,
        dry_run: bool,
        cancel: CancellationToken,
        on_event: Option<&(dyn Fn(EpicEvent) + Send + Sync)>,
    ) -> baton_epic::EpicReport {
        execute(
            &self.store,
            &self.project,
            command,
            EpicSettings {
                source: ModelSource::Live(&self.model),
                record: None,
                ask: None,
                on_event,
                cancel,
                dry_run,
                budget: Default::default(),
            },
        )
        .await
        .unwrap()
    }

    async fn story(&self, key: &str) -> baton_epic::EpicReport {
        self.run(
            Command::Story { key: key.into() },
            false,
            CancellationToken::new(),
            None,
        )
        .await
    }

    fn progress(&self, impl_dir: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(&format!("{impl_dir}/.baton-epic-progress.json"))).unwrap()
    }

    /// The story's line of sprint-status.yaml.
    fn status_line(&self, impl_dir: &str, key: &str) -> String {
        self.read(&format!("{impl_dir}/sprint-status.yaml"))
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}:")))
            .unwrap()
            .split(" #")
            .next()
            .unwrap()
            .trim()
            .to_string()
    }
}

/// The position of the first served request of `phase`.
fn first(served: &[String], phase: &str) -> usize {
    served
        .iter()
        .position(|p| p == phase)
        .unwrap_or_else(|| panic!("no {phase} request in {served:?}"))
}

fn lantern(scenario: Scenario) -> World {
    let w = World::new("f1-bmad612", F1_IMPL, scenario);
    // The build of 1-2 was left in progress (the fixture's spec says in-review: another test's
    // concern).
    let spec = format!("{F1_IMPL}/spec-1-2-glass-chimney.md");
    let text = w
        .read(&spec)
        .replace("status: 'in-review'", "status: 'in-progress'");
    w.write(&spec, &text);
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_build_auto_skill_builds_the_story_and_the_review_skill_reviews_it() {
    let w = lantern(Scenario::default());
    let sprint_before = w.read(&format!("{F1_IMPL}/sprint-status.yaml"));
    let plan = w
        .run(
            Command::Story {
                key: "1-2-glass-chimney".into(),
            },
            true,
            CancellationToken::new(),
            None,
        )
        .await;
    // BMAD 6.12's own pipeline: build, then code review; nothing bundled runs.
    let names: Vec<&str> = plan.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(names, ["build", "code-review"]);
    assert_eq!(plan.pipeline.source.as_str(), "bmad-6.11+");
    let dev = plan
        .phases
        .iter()
        .find(|p| p.phase.as_str() == "build")
        .unwrap();
    assert_eq!(dev.workflow, "bmad-build-auto");
    assert!(
        dev.package.starts_with(".claude/skills/bmad-build-auto"),
        "{dev:?}"
    );
    let how = dev.how.clone().unwrap();
    assert!(how.contains("resolved by baton"), "{how}");
    assert!(
        how.contains("uv is not on PATH") || how.contains("renderer failed"),
        "{how}"
    );
    assert!(how.contains("_bmad/custom/bmad-build-auto.toml"), "{how}");
    let review = plan
        .phases
        .iter()
        .find(|p| p.phase.as_str() == "code-review")
        .unwrap();
    assert_eq!(review.workflow, "bmad-code-review");

    let report = w.story("1-2-glass-chimney").await;
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: false },
        "{report:?}"
    );
    assert_eq!(report.stories_completed, ["1-2-glass-chimney"]);

    // The build phase got the project's skill, rendered with its customization layers, not
    // the bundled prompt, and no host path.
    let dev_requests = w.player.method_requests("build");
    let request = dev_requests
        .first()
        .expect("the build phase asked the model");
    for marker in [
        "LANTERN-BUILD-AUTO-MARKER",
        "LANTERN-CUSTOMIZE-MARKER",
        "LANTERN-TEAM-FACT",
        "LANTERN-DONE-BELL",
        "@pkg/step-01-clarify-and-route.md",
        "Its spec file: `@project/delivery/impl/spec-1-2-glass-chimney.md`",
    ] {
        assert!(request.contains(marker), "{marker} missing from {request}");
    }
    assert!(!request.contains("RUN_DIRECTIVE"), "{request}");
    assert!(!request.contains("Implement the tasks"), "{request}");
    assert!(
        !request.contains("{{.implementation_artifacts}}"),
        "{request}"
    );
    assert!(
        !request.contains(&w.project.display().to_string()),
        "{request}"
    );
    let review_request = w.player.method_requests("code-review");
    let review_request = review_request
        .first()
        .expect("the review phase asked the model");
    assert!(
        review_request.contains("LANTERN-REVIEW-MARKER"),
        "{review_request}"
    );
    assert!(
        review_request.contains("LANTERN-REVIEW-FACT"),
        "{review_request}"
    );

    // The loop went build → code-review, and read the verdicts from files; no bundled phase
    // ran around BMAD's own.
    let served = w.player.served();
    assert!(
        first(&served, "build") < first(&served, "code-review"),
        "{served:?}"
    );
    for bundled in ["create-story", "validate", "dev", "revision"] {
        assert!(!served.iter().any(|p| p == bundled), "{served:?}");
    }
    let spec = w.read(&format!("{F1_IMPL}/spec-1-2-glass-chimney.md"));
    assert!(spec.contains("status: 'done'"), "{spec}");
    assert!(spec.contains("## Auto Run Result"), "{spec}");
    assert!(spec.contains("### Review Findings"), "{spec}");
    assert!(
        w.read("src/1-2-glass-chimney.txt")
            .contains("bmad-build-auto")
    );

    // sprint-status.yaml changed only in the story's value and last_updated: the review skill's
    // own write was undone and the status applied by the loop's writer.
    let after = w.read(&format!("{F1_IMPL}/sprint-status.yaml"));
    let strip = |t: &str, status: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("last_updated:"))
            .map(|l| {
                if l.trim_start().starts_with("1-2-glass-chimney:") {
                    format!("  1-2-glass-chimney: {status}")
                } else {
                    l.to_string()
                }
            })
            .collect()
    };
    assert_eq!(strip(&after, "X"), strip(&sprint_before, "X"));
    assert_eq!(
        w.status_line(F1_IMPL, "1-2-glass-chimney"),
        "1-2-glass-chimney: done"
    );

    // Each skill phase is a recorded task run, its record saying how the skill was rendered;
    // the rendered files are in the run's read-only @pkg folder.
    let progress = w.progress(F1_IMPL);
    let runs = progress["runs"].as_array().unwrap();
    let dev_run = runs.iter().find(|r| r["phase"] == "build").unwrap();
    assert!(
        dev_run["method"]
            .as_str()
            .unwrap()
            .contains("resolved by baton"),
        "{dev_run}"
    );
    let id = dev_run["runId"].as_str().unwrap();
    let project = w.store.project(&w.project).unwrap();
    let meta = project.get_run(id).unwrap();
    assert_eq!(meta.kind, RunKind::Task);
    assert_eq!(meta.workflow_ref, "epic-1/1-2-glass-chimney/build.1");
    let step = std::fs::read_to_string(
        baton_engine::task_run::package_dir(&project, id).join("step-01-clarify-and-route.md"),
    )
    .unwrap();
    assert!(
        step.contains("@project/delivery/impl/spec-<slug>.md"),
        "{step}"
    );
    let review_run = runs.iter().find(|r| r["phase"] == "code-review").unwrap();
    assert_eq!(
        project
            .get_run(review_run["runId"].as_str().unwrap())
            .unwrap()
            .kind,
        RunKind::Task
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_skill_that_asks_for_changes_sends_the_story_back_to_the_build() {
    let w = lantern(Scenario {
        changes: vec![("1-2-glass-chimney".into(), 1)],
        ..Scenario::default()
    });
    let report = w.story("1-2-glass-chimney").await;
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: false },
        "{report:?}"
    );
    // Two builds: the second was told the review's findings.
    let builds = w.player.method_requests("build");
    let second = builds
        .iter()
        .find(|r| r.contains("reviewCycle: 2"))
        .expect("a second build");
    assert!(second.contains("handle the empty input"), "{second}");
    assert!(
        second.contains("The code review asked for changes"),
        "{second}"
    );
    assert_eq!(
        w.status_line(F1_IMPL, "1-2-glass-chimney"),
        "1-2-glass-chimney: done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_halts_blocked_pauses_the_loop_with_its_blocking_condition() {
    let w = lantern(Scenario {
        blocked: vec!["1-2-glass-chimney".into()],
        ..Scenario::default()
    });
    let report = w.story("1-2-glass-chimney").await;
    let EpicOutcome::Paused { failure } = &report.outcome else {
        panic!("{report:?}");
    };
    assert_eq!(failure.code, "EPIC_PHASE_BLOCKED");
    assert!(failure.message.contains("intent gap"), "{failure:?}");
    assert!(
        failure.message.contains("spec-1-2-glass-chimney.md"),
        "{failure:?}"
    );
    // Not retried: the skill would halt the same way on the same spec.
    assert_eq!(
        w.player.method_requests("build").len(),
        2,
        "one run: a turn and its finish"
    );
    assert_eq!(
        w.status_line(F1_IMPL, "1-2-glass-chimney"),
        "1-2-glass-chimney: in-progress"
    );
    assert!(w.player.method_requests("code-review").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_phase_stopped_mid_run_resumes_the_same_task_run() {
    let w = lantern(Scenario::default());
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let wrote = Mutex::new(false);
    // Stop right after the build's first tool call: the run is half done.
    let on_event = move |e: EpicEvent| {
        if let EpicEvent::Engine(baton_engine::EngineEvent::ToolCall { name, .. }) = &e
            && name == "fs.write"
        {
            *wrote.lock().unwrap() = true;
            stop.cancel();
        }
    };
    let report = w
        .run(
            Command::Story {
                key: "1-2-glass-chimney".into(),
            },
            false,
            cancel,
            Some(&on_event),
        )
        .await;
    assert_eq!(report.outcome, EpicOutcome::Interrupted, "{report:?}");
    let progress = w.progress(F1_IMPL);
    let id = progress["story"]["run"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let resumed = w
        .run(Command::Resume, false, CancellationToken::new(), None)
        .await;
    assert_eq!(
        resumed.outcome,
        EpicOutcome::Done { epic_done: false },
        "{resumed:?}"
    );
    // One build run, continued: the same id, its conversation kept.
    let progress = w.progress(F1_IMPL);
    let devs: Vec<&serde_json::Value> = progress["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] == "build")
        .collect();
    assert_eq!(devs.len(), 1, "{devs:?}");
    assert_eq!(devs[0]["runId"], id.as_str());
    let project = w.store.project(&w.project).unwrap();
    let tasks = project
        .list_runs()
        .unwrap()
        .into_iter()
        .filter(|r| r.workflow_ref.contains("/build."))
        .count();
    assert_eq!(tasks, 1);
    assert_eq!(
        w.status_line(F1_IMPL, "1-2-glass-chimney"),
        "1-2-glass-chimney: done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_dev_story_workflow_builds_and_the_classic_review_approves() {
    let w = World::new("f2-bmad60", F2_IMPL, Scenario::default());
    let plan = w
        .run(
            Command::Story {
                key: "2-2-pest-log".into(),
            },
            true,
            CancellationToken::new(),
            None,
        )
        .await;
    let dev = plan
        .phases
        .iter()
        .find(|p| p.phase.as_str() == "dev")
        .unwrap();
    assert_eq!(dev.workflow, "dev-story");
    assert!(dev.package.contains("classic BMAD workflow"), "{dev:?}");
    assert!(
        dev.how
            .as_deref()
            .unwrap()
            .contains("_bmad/bmm/config.yaml"),
        "{dev:?}"
    );

    let report = w.story("2-2-pest-log").await;
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: false },
        "{report:?}"
    );
    let request = w.player.method_requests("dev");
    let request = request.first().unwrap();
    assert!(request.contains("ORCHARD-CLASSIC-MARKER"), "{request}");
    assert!(
        request.contains(
            "sprint_status: @project/_bmad-output/implementation-artifacts/sprint-status.yaml"
        ),
        "{request}"
    );
    assert!(
        request.contains("goal=\\\"Implement the story of orchard\\\""),
        "{request}"
    );
    assert!(request.contains("{{story_path}}"), "{request}");
    assert!(!request.contains("{project-root}"), "{request}");
    assert!(
        !request.contains(&w.project.display().to_string()),
        "{request}"
    );
    let review = w.player.method_requests("code-review");
    assert!(review.first().unwrap().contains("ORCHARD-REVIEW-MARKER"));
    let served = w.player.served();
    assert!(
        first(&served, "dev") < first(&served, "code-review"),
        "{served:?}"
    );
    // The classic cycle is BMAD's own: no bundled revision between dev-story and the review.
    assert!(!served.iter().any(|p| p == "revision"), "{served:?}");
    assert_eq!(plan.pipeline.source.as_str(), "bmad-classic");
    assert_eq!(w.status_line(F2_IMPL, "2-2-pest-log"), "2-2-pest-log: done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_named_in_baton_toml_runs_its_phase_and_a_package_keeps_the_bundled_one() {
    let w = lantern(Scenario::default());
    // The classic workflow of another install, named by folder, for dev; the review pinned to
    // the bundled package.
    let wf = "team/workflows/dev-story";
    std::fs::create_dir_all(w.project.join(wf)).unwrap();
    w.write(
        &format!("{wf}/workflow.yaml"),
        "name: team-dev\ninstructions: \"{installed_path}/instructions.md\"\n",
    );
    w.write(
        &format!("{wf}/instructions.md"),
        "TEAM-DEV-MARKER: build it.\n",
    );
    w.write(
        "baton.toml",
        &format!(
            "[autopilot]\nimplementation_artifacts = \"{F1_IMPL}\"\n[autopilot.phases.build]\nskill = \"{wf}\"\n[autopilot.phases.code-review]\npackage = \"bmad-phase4\"\n"
        ),
    );
    let plan = w
        .run(
            Command::Story {
                key: "1-2-glass-chimney".into(),
            },
            true,
            CancellationToken::new(),
            None,
        )
        .await;
    let dev = plan
        .phases
        .iter()
        .find(|p| p.phase.as_str() == "build")
        .unwrap();
    assert_eq!(dev.workflow, "team-dev");
    let review = plan
        .phases
        .iter()
        .find(|p| p.phase.as_str() == "code-review")
        .unwrap();
    assert!(review.package.contains("bmad-phase4"), "{review:?}");

    w.write(
        "baton.toml",
        &format!("[autopilot]\nimplementation_artifacts = \"{F1_IMPL}\"\n[autopilot.phases.build]\nskill = \"bmad-nothing\"\n"),
    );
    let e = execute(
        &w.store,
        &w.project,
        Command::Story {
            key: "1-2-glass-chimney".into(),
        },
        EpicSettings {
            source: ModelSource::Live(&w.model),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: true,
            budget: Default::default(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "EPIC_PHASE_SKILL_NOT_FOUND");
    assert!(e.hint.unwrap().contains("bmad-build-auto"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_story_is_built_by_the_installed_build_alone() {
    let w = lantern(Scenario::default());
    let report = w.story("1-3-oil-gauge").await;
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: false },
        "{report:?}"
    );
    // BMAD 6.12 has no create-story before build: the build skill writes the story's spec,
    // under the name baton gave it, and no bundled phase runs around it.
    let build = w.player.method_requests("build");
    assert!(
        build[0].contains(
            "No spec exists yet: write it as `@project/delivery/impl/spec-1-3-oil-gauge.md`"
        ),
        "{}",
        build[0]
    );
    let spec = w.read(&format!("{F1_IMPL}/spec-1-3-oil-gauge.md"));
    assert!(spec.contains("status: 'done'"), "{spec}");
    assert!(!w.project.join(F1_IMPL).join("1-3-oil-gauge.md").exists());
    let served = w.player.served();
    assert!(
        first(&served, "build") < first(&served, "code-review"),
        "{served:?}"
    );
    for bundled in ["create-story", "validate", "dev", "revision"] {
        assert!(!served.iter().any(|p| p == bundled), "{served:?}");
    }
    assert_eq!(
        w.status_line(F1_IMPL, "1-3-oil-gauge"),
        "1-3-oil-gauge: done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundled_phase_configured_in_baton_toml_comes_back_into_the_build_pipeline() {
    let w = lantern(Scenario::default());
    w.write(
        "baton.toml",
        &format!(
            "[autopilot]\nimplementation_artifacts = \"{F1_IMPL}\"\n[autopilot.phases.validate]\npackage = \"bmad-phase4\"\n"
        ),
    );
    let report = w.story("1-3-oil-gauge").await;
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: false },
        "{report:?}"
    );
    let names: Vec<&str> = report.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(names, ["validate", "build", "code-review"]);
    assert!(
        report
            .pipeline
            .reason
            .contains("[autopilot.phases.validate]")
    );
    let served = w.player.served();
    assert!(
        first(&served, "validate") < first(&served, "build"),
        "{served:?}"
    );

    // dev is not a phase of BMAD 6.11+'s pipeline: configuring it is refused, not ignored.
    w.write(
        "baton.toml",
        &format!(
            "[autopilot]\nimplementation_artifacts = \"{F1_IMPL}\"\n[autopilot.phases.dev]\nskill = \"bmad-build-auto\"\n"
        ),
    );
    let e = execute(
        &w.store,
        &w.project,
        Command::Resume,
        EpicSettings {
            source: ModelSource::Live(&w.model),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: true,
            budget: Default::default(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "EPIC_PIPELINE_INVALID", "{e:?}");
    assert!(e.hint.unwrap().contains("[autopilot.phases.build]"));
}
