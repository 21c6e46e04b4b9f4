//! Helpers shared by baton's tests: where the repository and its examples are, copying a
//! directory, the reference conversation beside the repository, a headless-browser driver
//! ([`cdp`]) with a server of fixed pages for it ([`html_server`]), a loopback JSON server
//! for played models ([`json_server`]), a throwaway PostgreSQL cluster ([`pg`]), git for
//! fixtures ([`git`]: the sample project committed, or pushed to a bare remote), and a seeded
//! random generator for kill tests ([`rng`]).

// Test-only code: a helper that cannot do its job fails the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod cdp;
pub mod git;
pub mod html_server;
pub mod imports;
pub mod json_server;
pub mod pg;
pub mod rng;
pub mod trim_trace;

use std::fs;
use std::path::{Path, PathBuf};

/// The name the test harness gives `test`, declared in `module` (pass `module_path!()`): the
/// module path past the crate's name, so a test binary can run one of its own tests again
/// (`--exact`). In a crate root it is the bare name.
pub fn harness_name(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `examples/packages/<name>`.
pub fn example(name: &str) -> PathBuf {
    repo().join("examples/packages").join(name)
}

/// The recorded conversation the demo replays.
pub fn demo_trace() -> PathBuf {
    repo().join("examples/traces/create-story-micro.trace.json")
}

/// Copies a directory tree (files and directories only).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries = fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries.flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy to {}: {e}", target.display()));
        }
    }
}

/// A fresh copy of the sample project at `<into>/project`.
pub fn sample_project(into: &Path) -> PathBuf {
    let project = into.join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    project
}

/// The reference conversation (`shared/seeds/000_*` beside the repository, as in CI). Tests
/// that need it skip, saying so, when it is absent; it is not copied into the repository.
pub fn seed_000() -> Option<PathBuf> {
    let found = fs::read_dir(repo().join("../shared/seeds"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("000_"))
        });
    if found.is_none() {
        eprintln!("shared/seeds/000_* not found beside the repository; skipping");
    }
    found
}

/// The files below `root` (relative paths, sorted): what a bundle's list must match.
pub fn files_on_disk(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
                found.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

/// Writes `text` at `rel` under `root`, parent folders made.
pub fn write_file(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

#[cfg(test)]
mod harness_name_tests {
    use super::harness_name;

    #[test]
    fn a_test_is_named_by_its_module_path_past_the_crates_name() {
        assert_eq!(harness_name("store::crash", "sigkill"), "crash::sigkill");
        assert_eq!(harness_name("e2e::a::b", "t"), "a::b::t");
        assert_eq!(harness_name("confine", "t"), "t");
    }
}
