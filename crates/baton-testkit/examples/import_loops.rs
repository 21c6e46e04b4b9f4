//! Prints each crate's size and the import loops between its files (see
//! `baton_testkit::imports`): `cargo run -p baton-testkit --example import_loops`; with a crate's
//! name, also the imports inside each of its loops (what to cut).

use baton_testkit::imports;

fn main() -> std::io::Result<()> {
    let detail = std::env::args().nth(1);
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let graphs = imports::workspace_graphs(&crates)?;
    let mut total = 0;
    for graph in &graphs {
        let loops = imports::loops(graph);
        println!(
            "{:<18} {:>6} lines  {} loop(s)",
            graph.name,
            graph.lines,
            loops.len()
        );
        for found in loops {
            total += 1;
            println!("    [{}] {}", found.files.len(), found.files.join(" ↔ "));
            if detail.as_deref() == Some(graph.name.as_str()) {
                for file in &found.files {
                    let inside: Vec<&str> = graph.edges[file]
                        .iter()
                        .filter(|t| found.files.contains(t))
                        .map(String::as_str)
                        .collect();
                    println!("        {file} → {}", inside.join(", "));
                }
            }
        }
    }
    println!("{total} loop(s) in the workspace");
    Ok(())
}
