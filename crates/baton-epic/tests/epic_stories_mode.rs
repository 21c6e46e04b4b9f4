//! Stories mode end to end (BMAD 6.12's folder+id contract) on the `f1s-stories` fixture, against
//! the played model over loopback HTTP: the walk follows `stories.yaml` in list order, each
//! story's status moves in its file's frontmatter as the phases complete, `sprint-status.yaml`
//! is never created nor touched, `spec_checkpoint` and `done_checkpoint` pause for a person, and
//! `resume` goes on in stories mode. Refusals (a broken `stories.yaml`, two files for one story,
//! a blocked story) come before anything is written.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::{Command, EpicEvent, EpicOutcome, EpicReport, EpicSettings, ModelSource, execute};
use baton_llm::HttpChatModel;
use baton_store::Store;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use support::player::{Player, Scenario};
use tokio_util::sync::CancellationToken;

const SPEC: &str = "_bmad-output/planning-artifacts/specs/kite-v1";
const IMPL: &str = "_bmad-output/implementation-artifacts";

fn fixture() -> PathBuf {
    baton_testkit::repo().join("crates/baton-epic/tests/fixtures/generations/f1s-stories")
}

struct World {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    store: Store,
    player: Player,
    model: HttpChatModel,
    notes: Mutex<Vec<String>>,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        baton_testkit::copy_dir(&fixture(), &project);
        let store = Store::new(tmp.path().join("home"));
        let player = Player::start(&project, Scenario::default());
        let model = baton_llm::testing::played_model(player.base_url()).unwrap();
        World {
            _tmp: tmp,
            project,
            store,
            player,
            model,
            notes: Mutex::new(Vec::new()),
        }
    }

    async fn run(
        &self,
        command: Command,
        dry_run: bool,
    ) -> Result<EpicReport, baton_epic::EpicError> {
        let on_event = |e: EpicEvent| {
            if let EpicEvent::Note(n) = e {
                self.notes.lock().unwrap().push(n);
            }
        };
        execute(
            &self.store,
            &self.project,
            command,
            EpicSettings {
                source: ModelSource::Live(&self.model),
                record: None,
                ask: None,
                on_event: Some(&on_event),
                cancel: CancellationToken::new(),
                dry_run,
                budget: Default::default(),
            },
        )
        .await
    }

    fn stories(&self) -> Command {
        Command::Stories {
            folder: SPEC.into(),
            max_stories: None,
        }
    }

    fn file(&self, rel: &str) -> PathBuf {
        self.project.join(rel)
    }

    /// The frontmatter status of a story file.
    fn status(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.file(&format!("{SPEC}/stories/{name}")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let block = text
            .strip_prefix("---\n")
            .unwrap()
            .split("\n---")
            .next()
            .unwrap();
        block
            .lines()
            .find_map(|l| l.strip_prefix("status:"))
            .unwrap()
            .trim()
            .trim_matches(['\'', '"'])
            .to_string()
    }

    /// The statuses the loop wrote for story `id`, in order.
    fn written(&self, id: &str) -> Vec<String> {
        self.notes
            .lock()
            .unwrap()
            .iter()
            .filter_map(|n| n.strip_prefix(&format!("{id}: status ")))
            .map(|rest| rest.split(' ').next().unwrap().to_string())
            .collect()
    }

    fn json(&self, rel: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.file(rel)).unwrap()).unwrap()
    }

    /// The variables of the phase runs of `story` in `phase`.
    fn variables(&self, story: &str, phase: &str) -> Vec<Value> {
        let progress = self.json(&format!("{IMPL}/.baton-epic-progress.json"));
        let project = self
            .store
            .project(&std::fs::canonicalize(&self.project).unwrap())
            .unwrap();
        progress["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["storyKey"] == story && r["phase"] == phase)
            .map(|r| {
                let id = r["runId"].as_str().unwrap();
                let read = project.state_file(id).read().unwrap();
                read.doc.to_value()["variables"].clone()
            })
            .collect()
    }
}

fn waiting(report: &EpicReport) -> (String, String, String) {
    match &report.outcome {
        EpicOutcome::Waiting { story, question } => (
            story.clone(),
            question.id.clone(),
            question.question.clone(),
        ),
        other => panic!("expected a question, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stories_walk_their_files_statuses_with_both_checkpoints_and_no_sprint_status() {
    let w = World::new();

    // 1. The walk skips the done story 1 and takes story 2 (a draft) up at create-story; after
    //    planning, its spec_checkpoint pauses the walk before dev.
    let report = w.run(w.stories(), false).await.unwrap();
    let (story, qid, question) = waiting(&report);
    assert_eq!(story, "2");
    assert!(question.contains("spec_checkpoint"), "{question}");
    assert!(
        question.contains(&format!("{SPEC}/stories/2-sail-panel.md")),
        "{question}"
    );
    assert_eq!(w.written("2"), ["ready-for-dev"]);
    assert_eq!(w.status("2-sail-panel.md"), "ready-for-dev");
    assert_eq!(w.status("1-spar-frame.md"), "done");
    assert_eq!(w.player.served().iter().filter(|p| *p == "dev").count(), 0);
    let state = w.json(&format!("{IMPL}/.run-epic-state.json"));
    assert_eq!(state["epicId"], format!("stories:{SPEC}"));
    assert_eq!(state["storiesFolder"], SPEC);
    assert_eq!(state["currentStoryKey"], "2");
    let agent = w.json(&format!("{IMPL}/2.agent-state.json"));
    assert_eq!(agent["questions"][0]["answer"], Value::Null);

    // 2. `resume` without an answer goes on in stories mode (no sprint-status here) and waits
    //    on the same question.
    let report = w.run(Command::Resume, false).await.unwrap();
    assert_eq!(waiting(&report).1, qid);
    assert_eq!(report.phases_run, 0);

    // 3. The answer lets story 2 run to done; story 1's done_checkpoint is not story 2's: the
    //    walk then pauses before story 3-1 because story 2 has done_checkpoint.
    let report = w
        .run(
            Command::Answer {
                story: "2".into(),
                question: None,
                text: "the panel spec is right".into(),
            },
            false,
        )
        .await
        .unwrap();
    let (story, _, question) = waiting(&report);
    assert_eq!(story, "3-1");
    assert!(
        question.contains("Story 2 (Sail panel) is done"),
        "{question}"
    );
    assert_eq!(report.stories_completed, ["2"]);
    assert_eq!(
        w.written("2"),
        ["ready-for-dev", "in-progress", "in-review", "done"]
    );
    assert_eq!(w.status("2-sail-panel.md"), "done");
    assert!(
        !w.file(&format!("{SPEC}/stories"))
            .join("3-1-tail-ribbon.md")
            .exists()
    );
    // The answer reached the developer (the played dev writes the answers it read).
    let code = std::fs::read_to_string(w.file("src/2.txt")).unwrap();
    assert!(code.contains("answer: the panel spec is right"), "{code}");

    // 4. Story 3-1 starts with no file: create-story makes `3-1-tail-ribbon.md` (the name
    //    BMAD derives), the loop gives it a frontmatter status, and the walk ends done.
    let report = w
        .run(
            Command::Answer {
                story: "3-1".into(),
                question: None,
                text: "go on".into(),
            },
            false,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(report.stories_completed, ["3-1"]);
    assert_eq!(
        w.written("3-1"),
        ["ready-for-dev", "in-progress", "in-review", "done"]
    );
    assert_eq!(w.status("3-1-tail-ribbon.md"), "done");
    let text =
        std::fs::read_to_string(w.file(&format!("{SPEC}/stories/3-1-tail-ribbon.md"))).unwrap();
    assert!(text.starts_with("---\nstatus: done\n---\n"), "{text}");

    // The folder+id variables, and invoke_dev_with for dev only (and only story 3-1's).
    let dev = w.variables("3-1", "dev");
    assert_eq!(dev.len(), 1);
    assert_eq!(
        dev[0]["invokeDevWith"],
        "Reuse the clip from the sail panel; no knots."
    );
    assert_eq!(dev[0]["specFolder"], SPEC);
    assert_eq!(dev[0]["storyId"], "3-1");
    assert_eq!(
        dev[0]["storyFile"],
        format!("{SPEC}/stories/3-1-tail-ribbon.md")
    );
    let create = w.variables("3-1", "create-story");
    assert_eq!(
        create[0]["storyFile"],
        format!("{SPEC}/stories/3-1-tail-ribbon.md")
    );
    assert_eq!(create[0]["storyTitle"], "Tail ribbon");
    assert!(create[0].get("invokeDevWith").is_none());
    assert!(w.variables("2", "dev")[0].get("invokeDevWith").is_none());

    // Nothing of sprint mode: no sprint-status, stories.yaml as it was, story 1 untouched.
    assert!(!w.file(&format!("{IMPL}/sprint-status.yaml")).exists());
    assert_eq!(
        std::fs::read(w.file(&format!("{SPEC}/stories.yaml"))).unwrap(),
        std::fs::read(fixture().join(format!("{SPEC}/stories.yaml"))).unwrap()
    );
    assert_eq!(
        std::fs::read(w.file(&format!("{SPEC}/stories/1-spar-frame.md"))).unwrap(),
        std::fs::read(fixture().join(format!("{SPEC}/stories/1-spar-frame.md"))).unwrap()
    );
    // The mode is recorded out of every model's reach.
    let root = std::fs::canonicalize(&w.project).unwrap();
    let record: Value = serde_json::from_slice(
        &std::fs::read(baton_epic::layout_record::path(&w.store, &root)).unwrap(),
    )
    .unwrap();
    assert_eq!(record["storiesFolder"], SPEC);
    let state = w.json(&format!("{IMPL}/.run-epic-state.json"));
    assert!(state["currentStoryKey"].is_null());

    // The board says it all.
    let board = baton_epic::stories_mode::status(&w.project, SPEC).unwrap();
    assert_eq!(board.status, "done");
    assert_eq!(board.standing, baton_epic::board::Standing::Done);
    let ids: Vec<&str> = board.stories.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "3-1"]);
    assert!(board.stories.iter().all(|s| s.status == "done"));
    assert_eq!(board.stories[2].runs.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_sprint_status_is_left_byte_for_byte() {
    let w = World::new();
    let sprint =
        "# kept as it is\ndevelopment_status:\n  epic-1: backlog\n  1-1-other-story: backlog\n";
    std::fs::create_dir_all(w.file(IMPL)).unwrap();
    std::fs::write(w.file(&format!("{IMPL}/sprint-status.yaml")), sprint).unwrap();
    let report = w.run(w.stories(), false).await.unwrap();
    assert_eq!(waiting(&report).0, "2");
    assert_eq!(
        std::fs::read_to_string(w.file(&format!("{IMPL}/sprint-status.yaml"))).unwrap(),
        sprint
    );
    // A sprint-mode run cannot start while a stories-mode story is in flight.
    let e = w
        .run(
            Command::Run {
                epic: "epic-1".into(),
                max_stories: None,
            },
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "EPIC_OTHER_IN_PROGRESS");
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    support::snapshot(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_plans_in_list_order_and_writes_nothing() {
    let w = World::new();
    let before = snapshot(&w.project);
    let report = w.run(w.stories(), true).await.unwrap();
    let EpicOutcome::Planned { plan, .. } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    let rows: Vec<(&str, &str, &str)> = plan
        .iter()
        .map(|p| (p.key.as_str(), p.status.as_str(), p.phase.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("2", "draft", "create-story"),
            ("3-1", "not-started", "create-story")
        ]
    );
    assert_eq!(report.epic_id, format!("stories:{SPEC}"));
    assert_eq!(report.runnable_left, 2);
    assert_eq!(snapshot(&w.project), before);
    assert!(!w.file(IMPL).exists());
    assert!(w.player.served().is_empty());
}

#[test]
fn broken_inputs_are_refused_with_their_line_before_anything_is_written() {
    let w = World::new();
    let yaml = w.file(&format!("{SPEC}/stories.yaml"));
    let check = |w: &World| baton_epic::preflight(&w.project, &w.stories()).unwrap_err();
    for (variant, line, words) in [
        ("prefix-clash.yaml", 7, "clash"),
        ("unquoted-id.yaml", 4, "not a string"),
        ("status-field.yaml", 4, "`status` field"),
        ("missing-description.yaml", 4, "no `description`"),
        ("duplicate-id.yaml", 7, "used twice"),
    ] {
        std::fs::copy(fixture().join("variants").join(variant), &yaml).unwrap();
        let e = check(&w);
        assert_eq!(e.code, "STORIES_YAML_INVALID", "{variant}: {}", e.message);
        assert!(
            e.message
                .starts_with(&format!("{SPEC}/stories.yaml (line {line}): ")),
            "{variant}: {}",
            e.message
        );
        assert!(e.message.contains(words), "{variant}: {}", e.message);
    }
    std::fs::copy(fixture().join(format!("{SPEC}/stories.yaml")), &yaml).unwrap();
    baton_epic::preflight(&w.project, &w.stories()).unwrap();

    // Two files for story 2: reported with both names, never guessed.
    std::fs::write(
        w.file(&format!("{SPEC}/stories/2-sail-panel-v2.md")),
        "---\nstatus: draft\n---\n",
    )
    .unwrap();
    let e = check(&w);
    assert_eq!(e.code, "STORY_FILE_AMBIGUOUS");
    assert!(e.message.contains("stories.yaml (line 6)"), "{}", e.message);
    assert!(
        e.message.contains("stories/2-sail-panel-v2.md")
            && e.message.contains("stories/2-sail-panel.md"),
        "{}",
        e.message
    );
    // The board shows it on the story instead of failing.
    let board = baton_epic::stories_mode::status(&w.project, SPEC).unwrap();
    assert!(
        board.stories[1]
            .problem
            .as_deref()
            .unwrap()
            .starts_with("STORY_FILE_AMBIGUOUS")
    );
    std::fs::remove_file(w.file(&format!("{SPEC}/stories/2-sail-panel-v2.md"))).unwrap();

    // A blocked story stops the walk where it is.
    let draft = w.file(&format!("{SPEC}/stories/2-sail-panel.md"));
    let text = std::fs::read_to_string(&draft).unwrap();
    std::fs::write(&draft, text.replace("status: draft", "status: blocked")).unwrap();
    let e = check(&w);
    assert_eq!(e.code, "EPIC_STORY_NOT_RUNNABLE");
    assert!(e.message.contains("(line 6): story \"2\""), "{}", e.message);
    assert!(e.message.contains("\"blocked\""), "{}", e.message);
    std::fs::write(&draft, text).unwrap();

    // No SPEC.md: nothing to plan from.
    std::fs::remove_file(w.file(&format!("{SPEC}/SPEC.md"))).unwrap();
    assert_eq!(check(&w).code, "STORIES_SPEC_MISSING");
    // A folder without stories.yaml, or outside the project.
    let e = baton_epic::preflight(
        &w.project,
        &Command::Stories {
            folder: "_bmad-output".into(),
            max_stories: None,
        },
    )
    .unwrap_err();
    assert_eq!(e.code, "STORIES_YAML_MISSING");
    let e = baton_epic::preflight(
        &w.project,
        &Command::Stories {
            folder: "../elsewhere".into(),
            max_stories: None,
        },
    )
    .unwrap_err();
    assert_eq!(e.code, "STORIES_FOLDER_INVALID");
    assert!(!w.file(IMPL).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_phase_before_the_build_spec_checkpoint_asks_before_the_build_starts() {
    let w = World::new();
    // BMAD 6.11+'s pipeline: nothing plans before the code is written.
    std::fs::write(
        w.file("baton.toml"),
        "[autopilot]\npipeline = [\"build\", \"code-review\"]\n",
    )
    .unwrap();
    let report = w.run(w.stories(), false).await.unwrap();
    let (story, qid, question) = waiting(&report);
    assert_eq!(story, "2");
    assert!(question.contains("spec_checkpoint"), "{question}");
    assert!(
        w.player.served().is_empty(),
        "nothing ran before the person looked: {:?}",
        w.player.served()
    );

    // Answered, story 2 is built and reviewed; nothing else of the old pipeline runs.
    let report = w
        .run(
            Command::Answer {
                story: "2".into(),
                question: Some(qid),
                text: "the panel spec is right".into(),
            },
            false,
        )
        .await
        .unwrap();
    assert!(
        !matches!(report.outcome, EpicOutcome::Paused { .. }),
        "{report:?}"
    );
    let served = w.player.served();
    assert!(served.iter().any(|p| p == "build"), "{served:?}");
    for not_run in ["create-story", "validate", "dev", "revision"] {
        assert!(!served.iter().any(|p| p == not_run), "{served:?}");
    }
    assert_eq!(w.status("2-sail-panel.md"), "done");
}
