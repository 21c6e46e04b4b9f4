use crate::exit;
use crate::report;
use crate::ui::color::{self, Paint, Stream};
use crate::ui::table::{Cell, Column, Table};
use anyhow::Context;
use baton_package::files::read_zip_bytes;
use baton_package::{
    Diagnostics, Limits, Origin, PackageFiles, ValidateOptions, validate_files, validate_path,
};
use baton_store::{PackageStore, durable, resolve_home};
use clap::Subcommand;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum PackageCommand {
    /// Pack a package directory into a .bmad archive with integrity.sha256 set.
    Pack {
        /// Package directory.
        dir: PathBuf,
        /// Output file (default: <name>-<version>.bmad in the current directory).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// Print what was packed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a package and copy it, immutably, into $BATON_HOME/packages/.
    Install {
        /// Package directory or .bmad file.
        package: PathBuf,
        /// Print the installed package as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List installed packages.
    List {
        /// Print the packages as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: PackageCommand) -> anyhow::Result<u8> {
    match cmd {
        PackageCommand::Pack { dir, output, json } => pack(&dir, output, json),
        PackageCommand::Install { package, json } => install(&package, json),
        PackageCommand::List { json } => list(json),
    }
}

fn pack(dir: &Path, output: Option<PathBuf>, as_json: bool) -> anyhow::Result<u8> {
    if !dir.is_dir() {
        anyhow::bail!(
            "{} is not a directory; `package pack` takes a package directory",
            dir.display()
        );
    }
    let result = validate_path(dir, &ValidateOptions::default());
    let Some(package) = &result.package else {
        eprint!("{}", report::to_text(&result, &dir.display().to_string()));
        eprintln!("not packed: fix the errors above first");
        return Ok(exit::INVALID);
    };
    let packed = baton_package::pack::pack(package.files())?;
    // Prove the archive is valid (and its integrity matches) before writing it anywhere.
    let mut diags = Diagnostics::default();
    let files = read_zip_bytes(&packed.bytes, &Limits::default(), &mut diags)
        .context("the archive just built cannot be read back")?;
    let check = validate_files(
        PackageFiles::from_map(Origin::Zip(PathBuf::new()), files),
        &ValidateOptions::default(),
        diags,
    );
    if !check.ok() {
        anyhow::bail!(
            "the archive just built does not validate: {}",
            report::to_text(&check, "archive")
        );
    }
    let output = output
        .unwrap_or_else(|| PathBuf::from(format!("{}-{}.bmad", package.name(), package.version())));
    durable::atomic_write(&output, &packed.bytes)?;
    if as_json {
        crate::ui::print_json(&json!({
            "ok": true,
            "output": output,
            "name": package.name(),
            "version": package.version(),
            "sha256": packed.sha256,
            "files": packed.files,
            "bytes": packed.bytes.len(),
        }))?;
    } else {
        outln!(
            "packed {} {} ({} files, {} bytes) -> {}\nintegrity.sha256: {}",
            package.name(),
            package.version(),
            packed.files,
            packed.bytes.len(),
            output.display(),
            packed.sha256
        );
    }
    Ok(exit::OK)
}

fn install(path: &Path, as_json: bool) -> anyhow::Result<u8> {
    let result = validate_path(path, &ValidateOptions::default());
    let Some(package) = &result.package else {
        eprint!("{}", report::to_text(&result, &path.display().to_string()));
        eprintln!("not installed: fix the errors above first");
        return Ok(exit::INVALID);
    };
    let home = resolve_home()?;
    let store = PackageStore::new(&home);
    let outcome = store.install(package, &path.display().to_string())?;
    if as_json {
        let mut value = serde_json::to_value(&outcome.package)?;
        value["fresh"] = json!(outcome.fresh);
        value["repaired"] = json!(outcome.repaired);
        value["path"] = json!(outcome.package.path);
        crate::ui::print_json(&value)?;
    } else if outcome.fresh {
        if outcome.repaired {
            eprintln!("the installed copy was damaged or incomplete; replacing it");
        }
        outln!(
            "installed {} -> {}",
            outcome.package.id,
            outcome.package.path.display()
        );
    } else {
        outln!(
            "already installed: {} ({})",
            outcome.package.id,
            outcome.package.path.display()
        );
    }
    Ok(exit::OK)
}

fn list(as_json: bool) -> anyhow::Result<u8> {
    let home = resolve_home()?;
    let packages = PackageStore::new(&home).list()?;
    if as_json {
        let values: Vec<_> = packages
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                v["path"] = json!(p.path);
                v
            })
            .collect();
        crate::ui::print_json(&values)?;
        return Ok(exit::OK);
    }
    if packages.is_empty() {
        outln!(
            "no packages installed in {}",
            home.join("packages").display()
        );
        return Ok(exit::OK);
    }
    let mut table = Table::new(&[
        Column::left("ID", 48),
        Column::left("WORKFLOWS", 40),
        Column::left("INSTALLED", usize::MAX),
    ]);
    for p in &packages {
        table.row(vec![
            Cell::painted(p.id.as_str(), Paint::Strong),
            p.workflows.join(",").into(),
            Cell::painted(p.installed_at.as_str(), Paint::Dim),
        ]);
    }
    out!("{}", table.render(color::enabled(Stream::Out)));
    Ok(exit::OK)
}
