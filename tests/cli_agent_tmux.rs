//! `baton agent` in a real terminal (tmux): the persona greets and shows its menu,
//! `create-story` starts the run with progress, `/menu` mid-run shows the menu and asks again,
//! the answer goes to the run, and the run completes; `/dismiss` ends the session.
//! Skipped, saying so, when tmux is not installed.

use crate::common;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use common::{Baton, Tmux, example, tmux_missing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_session_in_tmux() {
    if tmux_missing() {
        eprintln!("tmux is not installed; skipping the interactive session test");
        return;
    }
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let trace = Trace::load(&baton_testkit::demo_trace()).unwrap();
    let server = ScriptedServer::start(Reply::from_trace(&trace))
        .await
        .unwrap();
    let tmux = Tmux {
        socket: format!("baton-agent-{}", std::process::id()),
        target: "agent".into(),
    };
    let script = format!(
        "cd {cwd} && env BATON_HOME={home} OPENAI_BASE_URL={url} BATON_MODEL=scripted OPENAI_API_KEY=sk-test {bin} agent {pkg} --agent sm -p {project}; echo SESSION-ENDED $?; sleep 30",
        cwd = tmp.path().display(),
        home = baton.home.path().display(),
        url = server.base_url(),
        bin = env!("CARGO_BIN_EXE_baton"),
        pkg = example("create-story-micro").display(),
        project = project.display(),
    );
    tmux.run(160, 50, &script);

    let screen = tmux.wait_for("sm> ");
    assert!(screen.contains("Bob — Scrum Master"), "{screen}");
    assert!(screen.contains("1. Create the next story file  [create-story]"));

    tmux.type_line("create-story");
    let screen = tmux.wait_for("Which story should I prepare?");
    assert!(screen.contains("→ step-01-select-story (sm)"), "{screen}");

    tmux.type_line("/menu");
    tmux.wait_for("While the run asks: /menu");

    tmux.type_line("1-2-user-authentication");
    let screen = tmux.wait_for("completed: run");
    assert!(
        screen.contains("artifacts/stories/1-2-user-authentication.md"),
        "{screen}"
    );

    tmux.type_line("/dismiss");
    let screen = tmux.wait_for("SESSION-ENDED");
    assert!(screen.contains("Bob is dismissed."), "{screen}");
    assert!(screen.contains("SESSION-ENDED 0"), "{screen}");
    assert_eq!(server.received().len(), 10);
    assert!(
        project
            .join("artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );
}
