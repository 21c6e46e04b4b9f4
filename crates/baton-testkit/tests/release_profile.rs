//! The release profile is what a user installs (`cargo install --path crates/baton`): it must
//! carry no debug info (which made the binary 190 MB) and keep the symbol table (so a
//! backtrace names its functions). Measured with this profile: 50 MB (docs/BENCHMARKS.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use std::path::Path;

/// The lines of the `[profile.<name>]` table of the workspace manifest.
fn profile(name: &str) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let text = std::fs::read_to_string(manifest).unwrap();
    let header = format!("[profile.{name}]");
    text.lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .map(|l| l.split('#').next().unwrap_or_default().replace(' ', ""))
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_installed_binary_has_no_debug_info_and_keeps_its_symbols() {
    let release = profile("release");
    assert!(
        release
            .iter()
            .any(|l| l == "debug=false" || l == "debug=0" || l == "debug=\"none\""),
        "[profile.release] must set debug = false: {release:?}"
    );
    assert!(
        release.contains(&"strip=\"debuginfo\"".to_string()),
        "[profile.release] must strip debug info only (symbols name a backtrace's functions): {release:?}"
    );
    // Profiling keeps line tables, on top of release.
    let profiling = profile("profiling");
    assert!(
        profiling.contains(&"inherits=\"release\"".to_string()),
        "{profiling:?}"
    );
    assert!(
        profiling.contains(&"debug=\"line-tables-only\"".to_string()),
        "{profiling:?}"
    );
}
