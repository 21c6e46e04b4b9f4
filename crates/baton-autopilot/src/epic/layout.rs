//! Where a project keeps its implementation artifacts (`sprint-status.yaml`, story files and the
//! autopilot's files): `[autopilot] implementation_artifacts` in `baton.toml`, else
//! `implementation_artifacts` of `_bmad/bmm/config.yaml` with `{project-root}` substituted, else
//! `_bmad-output/implementation-artifacts/`.

use super::error::{EpicError, Result};
use std::path::{Component, Path, PathBuf};

pub const DEFAULT_DIR: &str = "_bmad-output/implementation-artifacts";
const BMM_CONFIG: &str = "_bmad/bmm/config.yaml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub project: PathBuf,
    /// The artifacts folder, absolute.
    pub dir: PathBuf,
    /// The same, relative to the project, with `/` separators (what phases and messages see).
    pub rel: String,
}

impl Layout {
    /// A project-relative path of a file in the artifacts folder.
    pub fn rel_file(&self, name: &str) -> String {
        if self.rel.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.rel)
        }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn layout_error(message: String) -> EpicError {
    EpicError::usage("EPIC_LAYOUT_INVALID", message).hint(
        "implementation artifacts must be a folder inside the project; set [autopilot] implementation_artifacts in baton.toml",
    )
}

/// Resolves the artifacts folder; `configured` comes from `baton.toml`.
pub fn resolve(project: &Path, configured: Option<&str>) -> Result<Layout> {
    let (value, from) = match configured {
        Some(v) => (
            v.to_string(),
            "baton.toml [autopilot] implementation_artifacts".to_string(),
        ),
        None => match bmm_setting(project)? {
            Some(v) => (v, format!("{BMM_CONFIG} implementation_artifacts")),
            None => (DEFAULT_DIR.to_string(), "the default".to_string()),
        },
    };
    let substituted = value
        .replace("{project-root}/", "")
        .replace("{project-root}", "");
    let candidate = Path::new(&substituted);
    let relative = if candidate.is_absolute() {
        candidate
            .strip_prefix(project)
            .map(Path::to_path_buf)
            .map_err(|_| layout_error(format!("{from} ({value}) is outside the project")))?
    } else {
        candidate.to_path_buf()
    };
    let mut parts = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => {
                return Err(layout_error(format!(
                    "{from} ({value}) must stay inside the project (no `..`)"
                )));
            }
        }
    }
    let rel = parts.join("/");
    Ok(Layout {
        project: project.to_path_buf(),
        dir: project.join(&rel),
        rel,
    })
}

/// `implementation_artifacts` of `_bmad/bmm/config.yaml`, if the file has it.
fn bmm_setting(project: &Path) -> Result<Option<String>> {
    let path = project.join(BMM_CONFIG);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EpicError::io("read", &path)(e)),
    };
    let options = serde_saphyr::options! { with_snippet: false };
    let value: serde_json::Value =
        serde_saphyr::from_str_with_options(&text, options).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or("").to_string();
            layout_error(format!("{BMM_CONFIG} is not valid YAML: {first}"))
        })?;
    Ok(value
        .get("implementation_artifacts")
        .and_then(|v| v.as_str())
        .map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmm_config_then_default_then_override() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert_eq!(resolve(root, None).unwrap().rel, DEFAULT_DIR);
        std::fs::create_dir_all(root.join("_bmad/bmm")).unwrap();
        std::fs::write(
            root.join(BMM_CONFIG),
            "implementation_artifacts: \"{project-root}/docs/impl\"\n",
        )
        .unwrap();
        let l = resolve(root, None).unwrap();
        assert_eq!(l.rel, "docs/impl");
        assert_eq!(l.dir, root.join("docs/impl"));
        assert_eq!(resolve(root, Some("work/./impl")).unwrap().rel, "work/impl");
        assert_eq!(
            resolve(root, Some("../elsewhere")).unwrap_err().code,
            "EPIC_LAYOUT_INVALID"
        );
        assert_eq!(
            resolve(root, Some("/etc")).unwrap_err().code,
            "EPIC_LAYOUT_INVALID"
        );
    }
}
