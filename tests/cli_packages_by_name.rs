//! An installed package runs by the name `baton package list` shows, everywhere a package is
//! taken (`run`, `run --queue`, `validate`, `graph`, `agent`); a path that exists still wins;
//! a package that is nowhere is reported with what was looked for and where.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_testkit::{demo_trace, sample_project};
use common::{Baton, example};

fn install(baton: &Baton) -> String {
    let path = example("create-story-micro");
    let installed = baton.run(&["package", "install", path.to_str().unwrap(), "--json"]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    installed.json()["id"].as_str().unwrap().to_string()
}

#[test]
fn an_installed_package_runs_validates_and_draws_by_its_name() {
    let baton = Baton::new();
    let id = install(&baton);
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    // Run from a folder without a `create-story-micro` in it: only the name can find it.
    let run = baton.run_in(
        tmp.path(),
        &[
            "run",
            "create-story-micro",
            "-p",
            project.to_str().unwrap(),
            "--replay",
            demo_trace().to_str().unwrap(),
            "--json",
        ],
    );
    assert!(
        run.code == 0 || run.code == 10,
        "{}{}",
        run.stdout,
        run.stderr
    );
    let run_id = run.json()["runId"].as_str().unwrap().to_string();
    let shown = baton.run(&["runs", "show", &run_id, "--json"]).json();
    assert_eq!(shown["run"]["packageId"], id.as_str(), "{shown:#}");

    let validated = baton.run_in(tmp.path(), &["validate", "create-story-micro"]);
    assert_eq!(
        validated.code, 0,
        "{}{}",
        validated.stdout, validated.stderr
    );
    assert!(validated.stdout.starts_with("ok: create-story-micro "));
    let by_version = baton.run_in(tmp.path(), &["validate", "create-story-micro@1.0.0"]);
    assert_eq!(by_version.code, 0, "{}", by_version.stderr);

    let graph = baton.run_in(tmp.path(), &["graph", "create-story-micro"]);
    assert_eq!(graph.code, 0, "{}", graph.stderr);
    assert!(graph.stdout.contains("flowchart") || graph.stdout.contains("graph"));
}

#[test]
fn a_path_that_exists_wins_over_the_installed_name() {
    let baton = Baton::new();
    install(&baton);
    let tmp = tempfile::tempdir().unwrap();
    // A folder named like the installed package, holding another (invalid) package.
    std::fs::create_dir(tmp.path().join("create-story-micro")).unwrap();
    let run = baton.run_in(tmp.path(), &["validate", "create-story-micro", "--json"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["ok"], false);
}

#[test]
fn a_package_found_nowhere_says_what_was_looked_for_and_where() {
    let baton = Baton::new();
    let id = install(&baton);
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let folder = baton.home.path().join("packages");
    let check = |args: &[&str]| {
        let run = baton.run_in(tmp.path(), args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        let text = format!("{}{}", run.stdout, run.stderr);
        assert!(text.contains("PACKAGE_NOT_FOUND"), "{args:?}: {text}");
        assert!(text.contains("create-story-mikro"), "{text}");
        assert!(
            text.contains(&tmp.path().join("create-story-mikro").display().to_string()),
            "the path tried: {text}"
        );
        assert!(
            text.contains(&folder.display().to_string()),
            "the folder: {text}"
        );
        assert!(text.contains(&id), "the installed packages: {text}");
        assert!(text.contains("baton package list"), "a hint: {text}");
    };
    let p = project.to_str().unwrap();
    check(&["run", "create-story-mikro", "-p", p, "--model", "m"]);
    check(&[
        "run",
        "create-story-mikro",
        "-p",
        p,
        "--json",
        "--model",
        "m",
    ]);
    // The queue is never reached: the package is looked up first (the port is closed).
    check(&[
        "run",
        "create-story-mikro",
        "-p",
        p,
        "--queue",
        "postgres://baton@127.0.0.1:9/baton",
    ]);
    check(&["validate", "create-story-mikro"]);
    check(&["graph", "create-story-mikro"]);
    check(&["agent", "create-story-mikro", "--input", "hi", "--json"]);
}

#[test]
fn a_queued_run_takes_an_installed_name() {
    let baton = Baton::new();
    install(&baton);
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    // Past the package: the project is not a git repository, which the queue refuses next.
    let run = baton.run_in(
        tmp.path(),
        &[
            "run",
            "create-story-micro",
            "-p",
            project.to_str().unwrap(),
            "--model",
            "m",
            "--queue",
            "postgres://baton@127.0.0.1:9/baton",
            "--json",
        ],
    );
    assert_eq!(
        run.json()["error"]["code"],
        "QUEUE_PROJECT_NOT_GIT",
        "{}",
        run.stderr
    );
}
