//! `baton new <DIR>`: writes the starter package of `baton_package::template` into a new or
//! empty directory and says how to validate and run it.

use crate::exit;
use crate::failure::Failure;
use baton_package::template::{self, TRACE_FILE};
use baton_store::durable;
use clap::Args;
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The directory to create (it may exist if it is empty).
    pub dir: PathBuf,
    /// Package name, also the workflow id (default: the directory's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: NewArgs) -> anyhow::Result<u8> {
    let dir = &args.dir;
    let name = match &args.name {
        Some(n) => n.clone(),
        None => dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let files = match template::new_package(&name) {
        Ok(f) => f,
        Err(e) => {
            return Ok(Failure::new(e.code(), e.to_string(), exit::INVALID)
                .hint(Some(e.hint()))
                .report(args.json));
        }
    };
    if let Err(f) = check_empty(dir) {
        return Ok(f.report(args.json));
    }
    for f in &files {
        if let Err(f) = write(&dir.join(&f.path), f.content.as_bytes()) {
            return Ok(f.report(args.json));
        }
    }
    let trace = dir.join(TRACE_FILE);
    if args.json {
        crate::ui::print_json(&json!({
            "ok": true,
            "dir": dir,
            "name": name,
            "files": files.iter().map(|f| &f.path).collect::<Vec<_>>(),
            "trace": trace,
        }))?;
        return Ok(exit::OK);
    }
    let shown = dir.display();
    outln!("created package {name} in {shown}: one agent, a two-step workflow, a scripted model");
    for f in &files {
        outln!("  {}", f.path);
    }
    outln!("\nnext:");
    outln!("  baton validate {shown}");
    outln!("  mkdir -p {name}-project");
    outln!(
        "  baton run {shown} --project {name}-project --replay {}",
        trace.display()
    );
    outln!(
        "\nThe replay answers as a model would, offline. Once you edit the steps, run with a real\nmodel: baton run {shown} --project <DIR> --model <MODEL> (see docs/packages.md)."
    );
    Ok(exit::OK)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let unusable = |e: String| {
        Failure::new(
            "NEW_DIR_UNUSABLE",
            format!("cannot write {}: {e}", path.display()),
            exit::FAILURE,
        )
        .hint(Some("choose a directory you can write to".into()))
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| unusable(e.to_string()))?;
    }
    durable::atomic_write(path, bytes).map_err(|e| unusable(e.to_string()))
}

/// A new package goes into a new or empty directory, so nothing of the user's is overwritten.
fn check_empty(dir: &Path) -> Result<(), Failure> {
    let refuse = |why: &str| {
        Failure::new(
            "NEW_DIR_NOT_EMPTY",
            format!("{} {why}", dir.display()),
            exit::INVALID,
        )
        .hint(Some(
            "name a new or empty directory, e.g. `baton new my-workflow`".into(),
        ))
    };
    match fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(refuse("is not empty")),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(refuse("is a file")),
        Err(e) => Err(Failure::new(
            "NEW_DIR_UNUSABLE",
            format!("cannot read {}: {e}", dir.display()),
            exit::FAILURE,
        )
        .hint(Some("choose a directory you can write to".into()))),
    }
}
