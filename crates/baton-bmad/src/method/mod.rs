//! The project's own BMAD method as the epic's phases: the skills a BMAD 6.x installer wrote
//! (`<tool folder>/skills/bmad-*/SKILL.md`) and the classic workflows of older installs
//! (`_bmad/bmm/workflows/4-implementation/<name>/workflow.yaml` + `instructions.xml` +
//! `checklist.md`, or a `workflow.md` with step files; also under `.bmad/` and `bmad/`).
//!
//! Which phase runs what, by default (the first one installed; the bundled `bmad-phase4`
//! otherwise):
//!
//! | phase        | installed method looked for                                  |
//! |--------------|--------------------------------------------------------------|
//! | create-story | `bmad-create-story` skill, classic `create-story`            |
//! | validate     | none: BMAD has no separate validation skill (bundled)        |
//! | dev          | `bmad-dev-story` skill, classic `dev-story`                  |
//! | build        | `bmad-build-auto` skill (BMAD 6.11+)                         |
//! | revision     | none: BMAD has no revision pass (bundled)                    |
//! | code-review  | `bmad-code-review` skill, classic `code-review`              |
//!
//! `bmad-build-auto` is the unattended build BMAD 6.11+ ships (what its `bmad-dev-auto` shim
//! forwards to); it records its outcome in the spec's frontmatter `status`, which the loop
//! reads. `bmad-build` is not used: it is the interactive variant and stops for a person at its
//! checkpoints. Which phases a project runs at all is its pipeline ([`crate::pipeline`]).

pub mod describe;
pub mod files;
pub mod format;
pub mod jinja;
pub mod layers;
pub mod render;

use crate::error::{BmadError, Result};
use crate::phase::Phase;
use files::Reader;
use serde_json::Value;

/// Where BMAD 6.x installers put skills, one folder per tool (`.claude/skills` for Claude
/// Code; `.agents/skills` is shared by most other tools, Cursor included since 6.12; older
/// installs wrote `.cursor/skills`). Searched in this order.
pub const SKILL_FOLDERS: &[&str] = &[
    ".claude/skills",
    ".agents/skills",
    ".cursor/skills",
    ".agent/skills",
    ".adal/skills",
    ".bob/skills",
    ".cline/skills",
    ".codebuddy/skills",
    ".codewhale/skills",
    ".cortex/skills",
    ".factory/skills",
    ".firebender/skills",
    ".iflow/skills",
    ".junie/skills",
    ".kiro/skills",
    ".kode/skills",
    ".neovate/skills",
    ".ona/skills",
    ".qoder/skills",
    ".qwen/skills",
    ".trae/skills",
    ".zcode/skills",
    ".zencoder/skills",
];

/// Where classic installs keep their implementation-phase workflows.
pub const CLASSIC_ROOTS: &[&str] = &[
    "_bmad/bmm/workflows/4-implementation",
    ".bmad/bmm/workflows/4-implementation",
    "bmad/bmm/workflows/4-implementation",
];

/// The installed methods a phase runs by default, in order of preference.
pub fn defaults(phase: Phase) -> &'static [&'static str] {
    match phase {
        Phase::CreateStory => &["bmad-create-story", "create-story"],
        Phase::Validate | Phase::Revision => &[],
        Phase::Dev => &["bmad-dev-story", "dev-story"],
        Phase::Build => &["bmad-build-auto"],
        Phase::CodeReview => &["bmad-code-review", "code-review"],
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A 6.10+ skill whose SKILL.md hands over to BMAD's `render_skill.py`, which renders its
    /// `workflow.md` and step files with the configuration and customization values.
    Rendered,
    /// A skill whose SKILL.md is the workflow itself; its customization is resolved when it
    /// starts.
    Plain,
    /// A classic workflow: `workflow.yaml`, its instructions file (`instructions.xml` or
    /// `instructions.md`) and usually `checklist.md`.
    Classic { instructions: String },
    /// A `workflow.md` with step files, installed as plain files (no manifest).
    Steps,
}

/// One installed skill or workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    /// Its folder, relative to the project.
    pub rel: String,
    pub kind: Kind,
    /// Marked deprecated by BMAD (`metadata.lifecycle: shim`): still a full workflow.
    pub shim: bool,
    pub description: Option<String>,
}

impl Installed {
    /// What it is, in words (`BMAD skill`, `classic BMAD workflow`, …).
    pub fn kind_name(&self) -> &'static str {
        match (&self.kind, self.shim) {
            (Kind::Rendered, _) => "BMAD skill, rendered",
            (Kind::Plain, false) => "BMAD skill",
            (Kind::Plain, true) => "BMAD skill, deprecated shim",
            (Kind::Classic { .. }, _) => "classic BMAD workflow",
            (Kind::Steps, _) => "BMAD step-file workflow",
        }
    }

    pub fn is_skill(&self) -> bool {
        matches!(self.kind, Kind::Rendered | Kind::Plain)
    }
}

/// YAML text as JSON (BMAD's configs and frontmatter).
pub fn yaml(text: &str) -> std::result::Result<Value, String> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options(text, options)
        .map_err(|e| e.to_string().lines().next().unwrap_or("").to_string())
}

/// A Markdown file's YAML frontmatter (`None` without one, or when it does not parse) and the
/// body after it.
pub fn frontmatter(text: &str) -> (Option<Value>, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    let Some(end) = rest.find("\n---") else {
        return (None, text);
    };
    let after = &rest[end + 4..];
    let body = after
        .strip_prefix("\r\n")
        .or_else(|| after.strip_prefix('\n'))
        .unwrap_or(after);
    (yaml(&rest[..end]).ok(), body)
}

fn invalid(rel: &str, problem: impl std::fmt::Display) -> BmadError {
    BmadError::usage("EPIC_SKILL_INVALID", format!("{rel}: {problem}"))
}

/// What is installed in folder `rel` (project-relative): a skill (`SKILL.md`), a classic
/// workflow (`workflow.yaml`) or a step-file workflow (`workflow.md`); `None` for anything else.
pub fn inspect(reader: &Reader, rel: &str) -> Result<Option<Installed>> {
    let rel = rel.trim_end_matches('/');
    let folder_name = rel.rsplit('/').next().unwrap_or(rel).to_string();
    if let Some(text) = reader.text(&files::join(rel, "SKILL.md"))? {
        let (front, body) = frontmatter(&text);
        let front = front.unwrap_or(Value::Null);
        let name = front
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| folder_name.clone());
        let shim = front.pointer("/metadata/lifecycle").and_then(Value::as_str) == Some("shim");
        let description = front
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let rendered =
            body.contains("render_skill.py") && reader.is_file(&files::join(rel, "workflow.md"));
        return Ok(Some(Installed {
            name,
            rel: rel.to_string(),
            kind: if rendered {
                Kind::Rendered
            } else {
                Kind::Plain
            },
            shim,
            description,
        }));
    }
    let yaml_name = ["workflow.yaml", "workflow.yml"]
        .into_iter()
        .find(|n| reader.is_file(&files::join(rel, n)));
    if let Some(yaml_name) = yaml_name {
        let yaml_rel = files::join(rel, yaml_name);
        let text = reader.text(&yaml_rel)?.unwrap_or_default();
        let doc = yaml(&text).map_err(|e| invalid(&yaml_rel, format!("is not valid YAML: {e}")))?;
        let name = doc
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| folder_name.clone());
        let named = doc
            .get("instructions")
            .and_then(Value::as_str)
            .and_then(|p| p.rsplit('/').next())
            .map(str::to_owned);
        let instructions = named
            .into_iter()
            .chain(["instructions.xml".to_string(), "instructions.md".to_string()])
            .find(|n| reader.is_file(&files::join(rel, n)))
            .ok_or_else(|| {
                invalid(
                    &yaml_rel,
                    "names no instructions file baton can find in its folder (instructions.xml or instructions.md)",
                )
            })?;
        return Ok(Some(Installed {
            name,
            rel: rel.to_string(),
            kind: Kind::Classic { instructions },
            shim: false,
            description: doc
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }));
    }
    // A package's workflow folder (with its graph) is not a workflow of its own.
    if reader.is_file(&files::join(rel, "workflow.md"))
        && !reader.is_file(&files::join(rel, "bmad.json"))
        && !reader.is_file(&files::join(rel, "workflow.graph.json"))
    {
        let text = reader
            .text(&files::join(rel, "workflow.md"))?
            .unwrap_or_default();
        let (front, _) = frontmatter(&text);
        let front = front.unwrap_or(Value::Null);
        return Ok(Some(Installed {
            name: front
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or(folder_name),
            rel: rel.to_string(),
            kind: Kind::Steps,
            shim: false,
            description: front
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }));
    }
    Ok(None)
}

/// A name that can only be a folder name (no path tricks).
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The installed skill or workflow called `name`: a skill in a tool folder first, then a
/// classic workflow; or, for a name with a `/`, the project-relative folder it names.
pub fn find(reader: &Reader, name: &str) -> Result<Option<Installed>> {
    let name = name.trim();
    if name.contains('/') {
        let rel = name.trim_start_matches("./").trim_end_matches('/');
        if rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
            return Err(BmadError::usage(
                "EPIC_PHASE_SKILL_NOT_FOUND",
                format!("skill {name:?} must be a folder inside the project (relative, no `..`)"),
            ));
        }
        return inspect(reader, rel);
    }
    if !plain_name(name) {
        return Ok(None);
    }
    for folder in SKILL_FOLDERS {
        let rel = format!("{folder}/{name}");
        if reader.is_file(&format!("{rel}/SKILL.md")) {
            return inspect(reader, &rel);
        }
    }
    for root in CLASSIC_ROOTS {
        let rel = format!("{root}/{name}");
        if reader.is_dir(&rel)
            && let Some(found) = inspect(reader, &rel)?
        {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The installed method `phase` runs by default, if the project has one.
pub fn default_for(reader: &Reader, phase: Phase) -> Result<Option<Installed>> {
    for name in defaults(phase) {
        if let Some(found) = find(reader, name)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Every BMAD skill and classic implementation workflow installed in the project (for
/// messages): `(name, folder)`.
pub fn installed_names(reader: &Reader) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for folder in SKILL_FOLDERS.iter().chain(CLASSIC_ROOTS) {
        for d in reader.dirs(folder) {
            if !out.iter().any(|(n, _)| *n == d) {
                out.push((d.clone(), format!("{folder}/{d}")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use baton_testkit::write_file as write;

    #[test]
    fn skills_before_classic_workflows_and_the_phase_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let r = Reader::open(root).unwrap();
        assert_eq!(default_for(&r, Phase::Dev).unwrap(), None);
        write(
            root,
            "_bmad/bmm/workflows/4-implementation/dev-story/workflow.yaml",
            "name: dev-story\ninstructions: \"{installed_path}/instructions.xml\"\n",
        );
        write(
            root,
            "_bmad/bmm/workflows/4-implementation/dev-story/instructions.xml",
            "<workflow/>",
        );
        let classic = default_for(&r, Phase::Dev).unwrap().unwrap();
        assert_eq!(
            classic.kind,
            Kind::Classic {
                instructions: "instructions.xml".into()
            }
        );
        write(
            root,
            ".agents/skills/bmad-dev-story/SKILL.md",
            "---\nname: bmad-dev-story\nmetadata:\n  lifecycle: shim\n---\n# Dev\n",
        );
        let shim = default_for(&r, Phase::Dev).unwrap().unwrap();
        assert_eq!((shim.kind.clone(), shim.shim), (Kind::Plain, true));
        assert_eq!(shim.rel, ".agents/skills/bmad-dev-story");
        write(
            root,
            ".claude/skills/bmad-build-auto/SKILL.md",
            "---\nname: bmad-build-auto\n---\nRun `uv run render_skill.py` once.\n",
        );
        // Without its workflow.md it is not a rendered skill.
        assert_eq!(
            default_for(&r, Phase::Build).unwrap().unwrap().kind,
            Kind::Plain
        );
        // Build-auto runs the build phase; dev keeps the dev-story skill.
        assert_eq!(
            default_for(&r, Phase::Dev).unwrap().unwrap().name,
            "bmad-dev-story"
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/workflow.md",
            "# Build\n",
        );
        let auto = default_for(&r, Phase::Build).unwrap().unwrap();
        assert_eq!(
            (auto.name.as_str(), auto.kind.clone()),
            ("bmad-build-auto", Kind::Rendered)
        );
        assert_eq!(default_for(&r, Phase::Validate).unwrap(), None);
        assert_eq!(
            find(&r, "_bmad/bmm/workflows/4-implementation/dev-story")
                .unwrap()
                .unwrap()
                .name,
            "dev-story"
        );
        assert!(find(&r, "../outside").is_err());
        assert_eq!(find(&r, "no-such-skill").unwrap(), None);
    }

    #[test]
    fn frontmatter_and_body() {
        let (f, body) = frontmatter("---\nname: x\nstatus: 'done'\n---\n# T\n");
        assert_eq!(f.unwrap()["status"], "done");
        assert_eq!(body, "# T\n");
        let (f, body) = frontmatter("# no frontmatter\n");
        assert!(f.is_none());
        assert_eq!(body, "# no frontmatter\n");
    }
}
