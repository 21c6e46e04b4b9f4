//! The workspace keeps its shape (docs/ARCHITECTURE.md): no loop of more than three files
//! importing each other inside a crate, at most six such loops in all, no crate above 15,000
//! lines. Read from the sources by `baton_testkit::imports`.

use baton_testkit::imports;

const MAX_LOOP_FILES: usize = 3;
const MAX_LOOPS: usize = 6;
const MAX_CRATE_LINES: usize = 15_000;

#[test]
fn no_crate_has_a_long_import_loop_and_the_workspace_has_few() {
    let graphs = imports::workspace_graphs(&baton_testkit::repo().join("crates")).unwrap();
    assert!(graphs.len() >= 15, "found only {} crates", graphs.len());
    let loops: Vec<imports::ImportLoop> = graphs.iter().flat_map(imports::loops).collect();
    let shown: Vec<String> = loops
        .iter()
        .map(|l| format!("{}: {}", l.krate, l.files.join(" ↔ ")))
        .collect();
    let long: Vec<&String> = loops
        .iter()
        .zip(&shown)
        .filter(|(l, _)| l.files.len() > MAX_LOOP_FILES)
        .map(|(_, s)| s)
        .collect();
    assert!(
        long.is_empty(),
        "import loops of more than {MAX_LOOP_FILES} files (cut them: move the shared item down):\n{}",
        long.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        loops.len() <= MAX_LOOPS,
        "{} import loops, at most {MAX_LOOPS}:\n{}",
        loops.len(),
        shown.join("\n")
    );
}

#[test]
fn no_crate_is_above_the_size_limit() {
    let graphs = imports::workspace_graphs(&baton_testkit::repo().join("crates")).unwrap();
    let big: Vec<String> = graphs
        .iter()
        .filter(|g| g.lines > MAX_CRATE_LINES)
        .map(|g| format!("{}: {} lines", g.name, g.lines))
        .collect();
    assert!(
        big.is_empty(),
        "crates above {MAX_CRATE_LINES} lines: {big:?}"
    );
}
