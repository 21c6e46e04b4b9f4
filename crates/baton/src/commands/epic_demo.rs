//! `baton demo epic`: the epic autopilot on a copy of the Taskboard sample, offline. Epic 2 has
//! two stories; the recorded model approves the first at once, and on the second asks one
//! question (the recording answers it) and gets `changes-requested` once. Everything is inside
//! the binary: the project, the bundled phase package and one trace per phase run.

use super::demo::{embed, mark_all_files, write_files};
use super::epic::{board_text, present, report_json};
use crate::args::demo::DemoCommand;
use crate::exit;
use crate::failure::Failure;
use crate::progress::Progress;
use crate::signals;
use baton_epic::{Command, EpicEvent, EpicOutcome, EpicSettings, ModelSource};
use baton_store::Store;

const PROJECT: &[(&str, &[u8])] = embed!(
    "../../../../examples/projects/taskboard-epic/";
    "README.md",
    "_bmad/bmm/config.yaml",
    "_bmad-output/implementation-artifacts/sprint-status.yaml",
    "_bmad-output/planning-artifacts/PRD.md",
    "_bmad-output/planning-artifacts/architecture.md",
    "_bmad-output/planning-artifacts/epics.md",
    "_bmad-output/planning-artifacts/ux.md",
    "_bmad-output/project-context.md",
    "src/README.md",
);

const TRACES: &[(&str, &[u8])] = embed!(
    "../../../../examples/traces/epic-demo/";
    "2-1-create-board.create-story.1.trace.json",
    "2-1-create-board.validate.1.trace.json",
    "2-1-create-board.dev.1.trace.json",
    "2-1-create-board.revision.1.trace.json",
    "2-1-create-board.code-review.1.trace.json",
    "2-2-move-task.create-story.1.trace.json",
    "2-2-move-task.validate.1.trace.json",
    "2-2-move-task.dev.1.trace.json",
    "2-2-move-task.revision.1.trace.json",
    "2-2-move-task.code-review.1.trace.json",
    "2-2-move-task.dev.2.trace.json",
    "2-2-move-task.revision.2.trace.json",
    "2-2-move-task.code-review.2.trace.json",
);

pub fn run(command: DemoCommand) -> anyhow::Result<u8> {
    let args = match command {
        DemoCommand::Epic(args) => args,
        DemoCommand::Session(args) => return super::session_demo::run(args),
        DemoCommand::Queue(args) => return super::demo_queue::run(args),
    };
    if let Err(f) = super::demo::clear_previous_demo(&args.dir, "baton demo epic") {
        return Ok(f.report(args.json));
    }
    if let Err(e) = write_files(&args.dir, PROJECT).and_then(|()| mark_all_files(&args.dir)) {
        return Ok(super::demo::dir_unusable(&args.dir, &e).report(args.json));
    }
    let store = Store::open_default()?;
    // The recorded model lives under baton's home, not in a temporary directory: a demo
    // stopped with Ctrl-C is continued with the same traces.
    let traces = match super::demo::bundled_traces(&store, "epic-demo-traces", TRACES) {
        Ok(t) => t,
        Err(f) => return Ok(f.report(args.json)),
    };
    let resume = super::epic::continue_command("resume", &args.dir, Some(&traces));
    let bar = Progress::new();
    let on_event = |e: EpicEvent| super::epic::show_event(&bar, e);
    let settings = EpicSettings {
        source: ModelSource::Replay(traces.clone()),
        record: None,
        ask: None,
        on_event: if args.json { None } else { Some(&on_event) },
        cancel: Default::default(),
        dry_run: false,
        budget: Default::default(),
    };
    let runtime = crate::runtime::runtime()?;
    let _signals = signals::watch(&runtime, settings.cancel.clone());
    signals::set_next(signals::Next {
        resume,
        answer: None,
    });
    if !args.json {
        eprintln!(
            "baton demo epic: epic-2 of the Taskboard sample in {} (replaying recorded answers, offline)",
            args.dir.display()
        );
    }
    let command = Command::Run {
        epic: "epic-2".into(),
        max_stories: None,
    };
    let result = runtime.block_on(baton_epic::execute(&store, &args.dir, command, settings));
    bar.finish();
    mark_all_files(&args.dir)?;
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            let code = if e.is_usage() {
                exit::INVALID
            } else {
                exit::FAILURE
            };
            return Ok(Failure::new(e.code, e.message, code)
                .hint(e.hint)
                .report(args.json));
        }
    };
    if args.json {
        crate::ui::print_json(&report_json(&report))?;
        return Ok(super::epic::exit_code(&report.outcome));
    }
    let next = |verb: &str| super::epic::continue_command(verb, &args.dir, Some(&traces));
    let code = present(&report, false, &next)?;
    if matches!(report.outcome, EpicOutcome::Interrupted) {
        return Ok(code);
    }
    if let Ok(board) = baton_epic::status(&args.dir, Some("epic-2")) {
        out!("\n{}", board_text(&board));
    }
    outln!(
        "\nThe files: {} (sprint-status.yaml, story files, .run-epic-state.json, review verdicts)",
        args.dir
            .join("_bmad-output/implementation-artifacts")
            .display()
    );
    outln!(
        "The board again: baton epic status --project {}",
        args.dir.display()
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::super::demo::tests::{listed, names};
    use super::*;

    /// A trace recorded again under another name, or a file added to the sample, is compiled
    /// in too (the replay would miss it otherwise).
    #[test]
    fn the_embedded_files_are_the_directories() {
        assert_eq!(names(TRACES), listed("examples/traces/epic-demo"));
        assert_eq!(names(PROJECT), listed("examples/projects/taskboard-epic"));
    }
}
