//! `baton demo`: the bundled create-story example on a copy of the sample project, replayed
//! from the bundled trace. Everything it needs is inside the binary, so it works anywhere,
//! offline, without a key.

use crate::args::demo::DemoArgs;
use crate::exit;
use crate::failure::Failure;
use crate::progress::Progress;
use crate::signals;
use baton_engine::driver::ABORTED;
use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{EngineEvent, Outcome};
use baton_llm::{ReplayModel, Trace};
use baton_store::Store;
use std::fs;
use std::path::Path;

use baton_engine::bundled_demo::{PACKAGE, PROJECT, TRACE};

/// Lists, one per line, the files `baton demo` wrote in its directory, so a second demo
/// removes exactly those and nothing a person added.
pub(super) const MARKER: &str = ".baton-demo";

pub(super) use baton_engine::bundled_demo::write_files;

/// Removes what an earlier demo wrote (the files its marker lists, then the directories they
/// leave empty). Refuses a non-empty directory without a marker.
pub(super) fn clear_previous_demo(dir: &Path, command: &str) -> Result<(), Failure> {
    if !dir.exists() {
        return Ok(());
    }
    let marker = match fs::read_to_string(dir.join(MARKER)) {
        Ok(m) => m,
        Err(_) if dir.read_dir().is_ok_and(|mut d| d.next().is_none()) => return Ok(()),
        Err(_) => {
            return Err(Failure::new(
                "DEMO_DIR_IN_USE",
                format!("{} exists and was not made by `{command}`", dir.display()),
                exit::INVALID,
            )
            .hint(Some("pass --dir to use another place".into())));
        }
    };
    let mut parents = Vec::new();
    for rel in marker.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // Only plain relative paths below the directory, whatever the marker says.
        let rel_path = Path::new(rel);
        if rel_path.is_absolute()
            || rel_path
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        let _ = fs::remove_file(dir.join(rel_path));
        parents.extend(rel_path.ancestors().skip(1).map(|p| dir.join(p)));
    }
    parents.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in parents {
        // Fails, as it should, on directories that still hold something.
        let _ = fs::remove_dir(p);
    }
    Ok(())
}

/// The sample project could not be written to `dir`.
pub(super) fn dir_unusable(dir: &Path, e: &std::io::Error) -> Failure {
    Failure::new(
        "DEMO_DIR_UNUSABLE",
        format!("cannot write the sample project to {}: {e}", dir.display()),
        exit::FAILURE,
    )
    .hint(Some(
        "pass --dir a directory you can write to (it is created when missing)".into(),
    ))
}

/// `&[(path, include_bytes!(base + path)), …]`: a demo's files inside the binary (`base` is
/// relative to the calling file).
macro_rules! embed {
    ($base:literal; $($rel:literal),* $(,)?) => {
        &[$(($rel, include_bytes!(concat!($base, $rel)) as &[u8])),*]
    };
}
pub(super) use embed;

/// Every file below `dir`, relative to `root`.
pub(super) fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// Lists every file under the demo directory (the sample, and all a session or an epic
/// wrote), so the next demo removes exactly those.
pub(super) fn mark_all_files(dir: &Path) -> std::io::Result<()> {
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.push(MARKER.to_string());
    files.sort();
    files.dedup();
    fs::write(dir.join(MARKER), files.join("\n") + "\n")
}

fn write_marker(dir: &Path, artifacts: &[&str]) -> std::io::Result<()> {
    let mut list: Vec<&str> = PROJECT.iter().map(|(rel, _)| *rel).collect();
    list.extend(artifacts);
    list.push(MARKER);
    list.sort_unstable();
    list.dedup();
    fs::write(dir.join(MARKER), list.join("\n") + "\n")
}

pub fn run(args: DemoArgs) -> anyhow::Result<u8> {
    let dir = &args.dir;
    if let Err(f) = clear_previous_demo(dir, "baton demo") {
        return Ok(f.report(args.json));
    }
    if let Err(e) = write_files(dir, PROJECT).and_then(|()| write_marker(dir, &[])) {
        return Ok(dir_unusable(dir, &e).report(args.json));
    }
    let package_dir = tempfile::tempdir()?;
    write_files(package_dir.path(), PACKAGE)?;

    let store = Store::open_default()?;
    let replay = ReplayModel::new(Trace::parse(TRACE)?)
        .with_source(baton_engine::bundled_demo::TRACE_SOURCE);
    let bar = Progress::new();
    let on_event = |e: EngineEvent| match e {
        // The recorded model looks for the sprint status, which the sample has not: a read of a
        // file not there is expected here, not a failure.
        EngineEvent::ToolCall {
            name,
            ok: false,
            error: Some(code),
            target,
        } if code == "ENOENT" => bar.suspend(|| {
            eprintln!(
                "    · {} {} is not there (expected: the model looks for it before it asks you)",
                crate::ui::visible_line(&name),
                crate::ui::visible_line(target.as_deref().unwrap_or("the file"))
            )
        }),
        e => bar.event(e),
    };
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    if !args.json {
        settings.on_event = Some(&on_event);
    }
    let start = StartRun::new(package_dir.path(), dir);
    let runtime = crate::runtime::runtime()?;
    let _signals = signals::watch(&runtime, settings.cancel.clone());
    let claimed = runner::create(&store, start, &serde_json::Map::new())?;
    let short = short_id(&claimed.run().run_id);
    // The run remembers its bundled trace: `baton resume` replays it again, offline.
    let resume = format!("baton resume {short}");
    signals::set_next(signals::Next {
        resume: resume.clone(),
        answer: None,
    });
    if !args.json {
        // Said once Ctrl-C is watched: from here on it stops the run, resumable.
        eprintln!(
            "baton demo: create-story-micro on {} (replaying a recorded model, offline)",
            dir.display()
        );
    }
    let finished = runtime.block_on(runner::continue_claimed(claimed, settings))?;
    bar.finish();
    if matches!(&finished.report.outcome, Outcome::Failed { code, .. } if code == ABORTED) {
        mark_all_files(dir)?;
        if args.json {
            crate::ui::print_json(&finished.to_json())?;
        } else {
            eprintln!(
                "{} continue with `{resume}`",
                crate::ui::color::err(crate::ui::Paint::Warn, "stopped;")
            );
        }
        return Ok(exit::STOPPED);
    }
    let artifacts: Vec<&str> = finished
        .state
        .get("artifacts")
        .and_then(|a| a.as_array())
        .map(|a| a.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    write_marker(dir, &artifacts)?;
    if args.json {
        crate::ui::print_json(&finished.to_json())?;
    } else if let Outcome::Completed { message } = &finished.report.outcome {
        outln!("\n{message}\n");
        outln!("Artifacts written under {}:", dir.display());
        if let Some(a) = finished.state.get("artifacts").and_then(|a| a.as_array()) {
            for p in a.iter().filter_map(|p| p.as_str()) {
                outln!("  {}", dir.join(p).display());
            }
        }
        outln!(
            "\nInspect the run: baton runs show {}",
            short_id(&finished.run.run_id)
        );
    }
    Ok(match finished.report.outcome {
        Outcome::Completed { .. } => exit::OK,
        Outcome::Waiting { .. } => exit::WAITING,
        Outcome::Failed { .. } => exit::FAILURE,
    })
}

/// A demo's recorded model, written once under baton's home (`bundled/<name>-<hash>/`) so a
/// demo stopped with Ctrl-C is continued, offline, from the same files.
pub(super) fn bundled_traces(
    store: &Store,
    name: &'static str,
    files: &'static [(&'static str, &'static [u8])],
) -> Result<std::path::PathBuf, Failure> {
    baton_autopilot::bundle::Bundle { name, files }
        .materialize(store.home())
        .map_err(|e| {
            Failure::new(
                "DEMO_TRACES_UNAVAILABLE",
                format!("cannot place the demo's recorded model: {e}"),
                exit::FAILURE,
            )
            .hint(Some(format!(
                "check that {} is writable (BATON_HOME chooses it)",
                store.home().display()
            )))
        })
}

/// The first 13 characters of a run id: unique enough for every command that takes one.
pub(super) fn short_id(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The files below `dir` of the repository, sorted.
    pub(in crate::commands) fn listed(dir: &str) -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir);
        let mut files = Vec::new();
        walk(&root, &root, &mut files);
        files.sort();
        files
    }

    /// The names of embedded files, sorted.
    pub(in crate::commands) fn names(files: &[(&str, &[u8])]) -> Vec<String> {
        let mut names: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
        names.sort();
        names
    }
}
