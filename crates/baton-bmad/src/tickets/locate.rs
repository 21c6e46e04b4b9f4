//! Where BMAD 7 keeps the ticket tree: `{output_folder}/initiative-<slug>/`, `output_folder`
//! read from the same configuration layers BMAD reads (6.12's `_bmad/config*.toml` deep-merged,
//! the module's value over `[core]`'s; older installs' `config.yaml`), `_bmad-output` when none
//! sets it.

use crate::bmad_config::{TOML_LAYERS, deep_merge, expand, project_relative};
use crate::error::{BmadError, Result, refused};
use baton_autopilot::untrusted::{self, limit};
use cap_std::fs::Dir;
use std::path::Path;

/// BMAD's default output folder.
pub const DEFAULT_OUTPUT: &str = "_bmad-output";
/// The flat configurations that may set `output_folder`, in the order they are tried.
const YAML_CONFIGS: [&str; 2] = ["_bmad/bmm/config.yaml", "_bmad/core/config.yaml"];
/// The module tables of the TOML layers that may set `output_folder` (BMAD 7's method module is
/// `method`; 6.x's is `bmm`), before `[core]`.
const MODULES: [&str; 2] = ["method", "bmm"];

/// The output folder: project-relative, and the rule that named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFolder {
    pub rel: String,
    pub rule: String,
}

fn read(root: &Dir, file: &str) -> Result<Option<String>> {
    match untrusted::read_in(root, Path::new(file), limit::CONFIG) {
        Ok(Some(bytes)) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Ok(None) => Ok(None),
        Err(e) => Err(refused(file, &e)),
    }
}

fn invalid(rule: &str, value: &str, why: &str) -> BmadError {
    BmadError::usage(
        "TICKETS_OUTPUT_FOLDER_INVALID",
        format!("{rule} ({value}) {why}"),
    )
    .hint("set output_folder to a folder inside the project (BMAD's installer writes it)")
}

/// `output_folder` as BMAD resolves it for this project.
pub fn output_folder(root: &Dir, project: &Path) -> Result<OutputFolder> {
    let mut merged = toml::Table::new();
    let mut last: Option<&str> = None;
    for file in TOML_LAYERS {
        let Some(text) = read(root, file)? else {
            continue;
        };
        // A layer BMAD cannot read is the layout's error (see `bmad_config`); here it sets
        // nothing.
        let Ok(layer) = toml::from_str::<toml::Table>(&text) else {
            continue;
        };
        last = Some(file);
        deep_merge(&mut merged, layer);
    }
    if let Some(file) = last {
        let table = |name: &str| -> Option<&toml::Table> {
            match name {
                "core" => merged.get("core").and_then(toml::Value::as_table),
                m => merged
                    .get("modules")
                    .and_then(toml::Value::as_table)
                    .and_then(|t| t.get(m))
                    .and_then(toml::Value::as_table),
            }
        };
        let lookup = |k: &str| -> Option<String> {
            MODULES
                .iter()
                .chain(["core"].iter())
                .find_map(|m| {
                    table(m)
                        .and_then(|t| t.get(k))
                        .and_then(toml::Value::as_str)
                })
                .map(str::to_owned)
        };
        if let Some(value) = lookup("output_folder") {
            let rule = format!("{file} output_folder");
            let rel = expand(&value, project, &lookup, 0)
                .and_then(|v| project_relative(project, &v))
                .map_err(|why| invalid(&rule, &value, &why))?;
            return Ok(OutputFolder { rel, rule });
        }
    }
    for file in YAML_CONFIGS {
        let Some(text) = read(root, file)? else {
            continue;
        };
        let options = serde_saphyr::options! { with_snippet: false };
        let Ok(value) = serde_saphyr::from_str_with_options::<serde_json::Value>(&text, options)
        else {
            continue;
        };
        let lookup = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        if let Some(v) = lookup("output_folder") {
            let rule = format!("{file} output_folder");
            let rel = expand(&v, project, &lookup, 0)
                .and_then(|x| project_relative(project, &x))
                .map_err(|why| invalid(&rule, &v, &why))?;
            return Ok(OutputFolder { rel, rule });
        }
    }
    Ok(OutputFolder {
        rel: DEFAULT_OUTPUT.to_string(),
        rule: "BMAD's default".to_string(),
    })
}

/// The names in `dir` that are folders starting with `prefix`, sorted (at most `max`).
pub fn folders(dir: &Dir, prefix: &str, max: usize) -> Vec<String> {
    let Ok(entries) = dir.entries() else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .take(max)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// The regular `.md` files directly in `dir`, sorted (at most `max`).
pub fn markdown_files(dir: &Dir, max: usize) -> Vec<String> {
    let Ok(entries) = dir.entries() else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .take(max)
        // Links and FIFOs too: reading them refuses them by name (a link out is never
        // followed, a FIFO never opened), rather than leaving a ticket silently without file.
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && !n.starts_with('.'))
        .collect();
    names.sort();
    names
}
