//! CI runs exactly the test command README.md gives a newcomer, and that command runs every
//! test binary even after one fails (`--no-fail-fast`), so one failure never hides the
//! others' results.

use std::fs;

/// The command lines of the first ```sh block after `heading` in `markdown`.
fn sh_block_after(markdown: &str, heading: &str) -> Vec<String> {
    let section = markdown
        .split_once(heading)
        .unwrap_or_else(|| panic!("README.md has no `{heading}`"))
        .1;
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .unwrap_or_else(|| panic!("no ```sh block after `{heading}`"))
        .0;
    block.lines().map(str::to_string).collect()
}

#[test]
fn ci_runs_the_readme_test_command_without_stopping_at_a_failure() {
    let repo = baton_testkit::repo();
    let readme = fs::read_to_string(repo.join("README.md")).unwrap();
    let readme_command = sh_block_after(&readme, "## Run the tests");
    assert_eq!(readme_command.len(), 1, "{readme_command:?}");
    let readme_command = &readme_command[0];
    assert!(
        readme_command.starts_with("cargo test --workspace --locked")
            && readme_command
                .split_whitespace()
                .any(|w| w == "--no-fail-fast"),
        "{readme_command}"
    );

    let ci = fs::read_to_string(repo.join(".ci/run")).unwrap();
    let ci_tests: Vec<&str> = ci
        .lines()
        .filter(|l| l.trim_start().starts_with("cargo test"))
        .collect();
    assert_eq!(
        ci_tests,
        vec![readme_command.as_str()],
        ".ci/run runs the README's test command, the same string"
    );
}
