//! BMAD's own configuration, every generation, read the way BMAD reads it, for the settings
//! that say where the implementation artifacts (and the story files) are:
//!
//! 1. BMAD 6.12: `_bmad/config.toml` < `_bmad/config.user.toml` < `_bmad/custom/config.toml` <
//!    `_bmad/custom/config.user.toml`, tables deep-merged, `[modules.bmm]
//!    implementation_artifacts`;
//! 2. BMAD 6.0: `_bmad/bmm/config.yaml` `implementation_artifacts` (early 6.0 installs:
//!    `sprint_artifacts`);
//! 3. `.bmad/bmm/config.yaml` `sprint_artifacts`, then `implementation_artifacts`, then
//!    `output_folder` (where its workflows fall back to);
//! 4. the alpha `bmad/bmm/config.yaml` `output_folder`; `dev_story_location` for stories.
//!
//! Values may hold `{project-root}`, `{config_source}:key` (another key of the same
//! configuration) and `{key}` tokens; they are resolved here. A value that leads outside the
//! project (an absolute path from another machine, `..`) is kept with the reason it is not
//! used: the caller reports it and never follows it. Every file is read through the project
//! root's handle, bounded ([`untrusted::read_in`]).

use super::error::{BmadError, Result};
use baton_autopilot::untrusted;
use cap_std::fs::Dir;
use serde_json::Value;
use std::path::{Component, Path};

/// The layers of BMAD 6.12's central configuration, lowest first.
pub const TOML_LAYERS: [&str; 4] = [
    "_bmad/config.toml",
    "_bmad/config.user.toml",
    "_bmad/custom/config.toml",
    "_bmad/custom/config.user.toml",
];

/// The flat module configurations of older generations, with the keys that name the artifacts
/// folder, in the order they are tried.
pub const YAML_CONFIGS: [(&str, &[&str]); 3] = [
    (
        "_bmad/bmm/config.yaml",
        &["implementation_artifacts", "sprint_artifacts"],
    ),
    (
        ".bmad/bmm/config.yaml",
        &[
            "sprint_artifacts",
            "implementation_artifacts",
            "output_folder",
        ],
    ),
    ("bmad/bmm/config.yaml", &["output_folder"]),
];

/// The key of the alpha configuration that names the story folder.
pub const DEV_STORY_LOCATION: &str = "dev_story_location";

/// One setting found in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The file and key it came from, e.g. `_bmad/custom/config.toml [modules.bmm]
    /// implementation_artifacts`.
    pub rule: String,
    /// The value as written.
    pub value: String,
    /// The folder it names, relative to the project (`/` separators, empty for the project
    /// itself); `Err` says why it is not used.
    pub folder: std::result::Result<String, String>,
}

/// What the project's BMAD configuration says, in rule order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BmadConfig {
    /// Settings naming the implementation-artifacts folder, first rule first.
    pub artifacts: Vec<Setting>,
    /// `dev_story_location` settings.
    pub story_dirs: Vec<Setting>,
}

fn invalid(file: &str, problem: impl std::fmt::Display) -> BmadError {
    BmadError::usage("EPIC_LAYOUT_INVALID", format!("{file}: {problem}")).hint(
        "fix the file (BMAD's installer writes it), or set [autopilot] implementation_artifacts in baton.toml",
    )
}

fn read(root: &Dir, file: &str) -> Result<Option<String>> {
    match untrusted::read_in(root, Path::new(file), untrusted::limit::CONFIG) {
        Ok(Some(bytes)) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Ok(None) => Ok(None),
        Err(e) => Err(crate::error::refused(file, &e)),
    }
}

/// Reads every configuration file of every generation that the project has.
pub fn load(root: &Dir, project: &Path) -> Result<BmadConfig> {
    let mut out = BmadConfig::default();
    load_toml(root, project, &mut out)?;
    for (file, keys) in YAML_CONFIGS {
        let Some(text) = read(root, file)? else {
            continue;
        };
        let options = serde_saphyr::options! { with_snippet: false };
        let value: Value = serde_saphyr::from_str_with_options(&text, options).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or("").to_string();
            invalid(file, format!("is not valid YAML: {first}"))
        })?;
        let lookup = |k: &str| value.get(k).and_then(scalar);
        for key in keys {
            if let Some(v) = lookup(key) {
                out.artifacts
                    .push(setting(format!("{file} {key}"), v, project, &lookup));
            }
        }
        if let Some(v) = lookup(DEV_STORY_LOCATION) {
            out.story_dirs.push(setting(
                format!("{file} {DEV_STORY_LOCATION}"),
                v,
                project,
                &lookup,
            ));
        }
    }
    Ok(out)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// BMAD 6.12's layers, deep-merged: the rule names the layer that set the value last.
fn load_toml(root: &Dir, project: &Path, out: &mut BmadConfig) -> Result<()> {
    let mut merged = toml::Table::new();
    let mut from: Option<&str> = None;
    for file in TOML_LAYERS {
        let Some(text) = read(root, file)? else {
            continue;
        };
        let layer: toml::Table = toml::from_str(&text).map_err(|e| {
            let message = e.message().to_string();
            let at = e
                .span()
                .map(|s| {
                    format!(
                        " (line {})",
                        text[..s.start.min(text.len())].lines().count().max(1)
                    )
                })
                .unwrap_or_default();
            invalid(file, format!("is not valid TOML{at}: {message}"))
        })?;
        if bmm(&layer)
            .and_then(|t| t.get("implementation_artifacts"))
            .is_some()
        {
            from = Some(file);
        }
        deep_merge(&mut merged, layer);
    }
    let Some(file) = from else {
        return Ok(());
    };
    let lookup = |k: &str| {
        let get = |t: Option<&toml::Table>| {
            t.and_then(|t| t.get(k)).and_then(|v| match v {
                toml::Value::String(s) => Some(s.clone()),
                toml::Value::Integer(i) => Some(i.to_string()),
                _ => None,
            })
        };
        get(bmm(&merged)).or_else(|| get(merged.get("core").and_then(toml::Value::as_table)))
    };
    match lookup("implementation_artifacts") {
        Some(v) => out.artifacts.push(setting(
            format!("{file} [modules.bmm] implementation_artifacts"),
            v,
            project,
            &lookup,
        )),
        None => out.artifacts.push(Setting {
            rule: format!("{file} [modules.bmm] implementation_artifacts"),
            value: String::new(),
            folder: Err("is not a string".into()),
        }),
    }
    Ok(())
}

fn bmm(t: &toml::Table) -> Option<&toml::Table> {
    t.get("modules")
        .and_then(toml::Value::as_table)
        .and_then(|m| m.get("bmm"))
        .and_then(toml::Value::as_table)
}

/// Tables merge key by key, recursively; any other value of `over` replaces the base's.
pub fn deep_merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn setting(
    rule: String,
    value: String,
    project: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Setting {
    let folder = expand(&value, project, lookup, 0).and_then(|v| project_relative(project, &v));
    Setting {
        rule,
        value,
        folder,
    }
}

/// Resolves `{project-root}`, `{config_source}:key` and `{key}` tokens (keys of the same
/// configuration, themselves resolved, at most 8 levels deep).
pub fn expand(
    value: &str,
    project: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
    depth: usize,
) -> std::result::Result<String, String> {
    if depth > 8 {
        return Err("refers to itself through its tokens".into());
    }
    let mut v = value.trim().to_string();
    if let Some(rest) = v.strip_prefix("{config_source}:") {
        let (key, tail) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let Some(found) = lookup(key) else {
            return Err(format!(
                "refers to {key}, which the configuration does not set"
            ));
        };
        v = format!("{}{tail}", expand(&found, project, lookup, depth + 1)?);
    }
    let mut out = String::new();
    let mut rest = v.as_str();
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let name = &rest[start + 1..start + len];
        if name == "project-root" {
            out.push_str(&project.to_string_lossy());
        } else if let Some(found) = lookup(name).filter(|_| !name.is_empty()) {
            out.push_str(&expand(&found, project, lookup, depth + 1)?);
        } else {
            return Err(format!("holds {{{name}}}, which baton cannot resolve"));
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A configured path as a folder relative to the project (`/` separators); `Err` says why it
/// is not one: an absolute path elsewhere (another machine's), a Windows path, `..`.
pub fn project_relative(project: &Path, value: &str) -> std::result::Result<String, String> {
    let value = value.trim();
    let bytes = value.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err("is an absolute path from another machine".into());
    }
    if value.contains('\\') {
        return Err("uses `\\` separators (a path from another machine)".into());
    }
    let candidate = Path::new(value);
    let relative = if candidate.is_absolute() {
        candidate
            .strip_prefix(project)
            .map_err(|_| "is outside the project (an absolute path elsewhere)".to_string())?
    } else {
        candidate
    };
    let mut parts = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return Err("must stay inside the project (no `..`)".into()),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn tokens_resolve_and_foreign_paths_are_refused() {
        let p = Path::new("/work/proj");
        let rel = |v: &str| expand(v, p, &none, 0).and_then(|v| project_relative(p, &v));
        assert_eq!(rel("{project-root}/docs/impl").unwrap(), "docs/impl");
        assert_eq!(rel("{project-root}").unwrap(), "");
        assert_eq!(rel("docs/./a").unwrap(), "docs/a");
        assert_eq!(rel("/work/proj/x").unwrap(), "x");
        assert!(
            rel("/Users/someone/proj/x")
                .unwrap_err()
                .contains("outside")
        );
        assert!(rel("c:/Users/x").unwrap_err().contains("another machine"));
        assert!(rel("../x").unwrap_err().contains(".."));
        assert!(rel("{nope}/x").unwrap_err().contains("{nope}"));
        let lookup = |k: &str| match k {
            "output_folder" => Some("{project-root}/docs".to_string()),
            "loop" => Some("{loop}".to_string()),
            _ => None,
        };
        let rel = |v: &str| expand(v, p, &lookup, 0).and_then(|v| project_relative(p, &v));
        assert_eq!(rel("{config_source}:output_folder").unwrap(), "docs");
        assert_eq!(
            rel("{config_source}:output_folder/stories").unwrap(),
            "docs/stories"
        );
        assert_eq!(
            rel("{output_folder}/sprint-artifacts").unwrap(),
            "docs/sprint-artifacts"
        );
        assert!(rel("{loop}").unwrap_err().contains("itself"));
        assert!(rel("{config_source}:absent").is_err());
    }

    #[test]
    fn layers_merge_deeply_and_the_last_one_names_the_rule() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("_bmad/custom")).unwrap();
        std::fs::write(
            root.join("_bmad/config.toml"),
            "[core]\noutput_folder = \"out\"\n[modules.bmm]\nimplementation_artifacts = \"{project-root}/a\"\nplanning_artifacts = \"p\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("_bmad/custom/config.toml"),
            "[modules.bmm]\nimplementation_artifacts = \"{output_folder}/team\"\n",
        )
        .unwrap();
        let dir = untrusted::open_root(root).unwrap();
        let c = load(&dir, root).unwrap();
        assert_eq!(c.artifacts.len(), 1);
        assert_eq!(
            c.artifacts[0].rule,
            "_bmad/custom/config.toml [modules.bmm] implementation_artifacts"
        );
        assert_eq!(c.artifacts[0].folder.as_deref(), Ok("out/team"));
        std::fs::write(
            root.join("_bmad/custom/config.user.toml"),
            "[modules.bmm]\nimplementation_artifacts = \"mine\"\n",
        )
        .unwrap();
        let c = load(&dir, root).unwrap();
        assert_eq!(c.artifacts[0].folder.as_deref(), Ok("mine"));
        assert!(
            c.artifacts[0]
                .rule
                .starts_with("_bmad/custom/config.user.toml")
        );
        std::fs::write(root.join("_bmad/config.user.toml"), "[core\n").unwrap();
        let e = load(&dir, root).unwrap_err();
        assert_eq!(e.code, "EPIC_LAYOUT_INVALID");
        assert!(e.message.contains("_bmad/config.user.toml"), "{e}");
        assert!(e.message.contains("line 1"), "{e}");
    }
}
