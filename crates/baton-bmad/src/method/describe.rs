//! `baton validate <folder>` on a BMAD skill folder (`SKILL.md`) or a classic workflow folder
//! (`workflow.yaml`): what baton would run and how, instead of a package error. The folder is
//! read within its project (the nearest folder above it with `_bmad/`, `.bmad/` or `bmad/`),
//! whose configuration and customization layers it is rendered with, exactly as a phase run
//! would render it; a folder that cannot be rendered is refused with the reason.

use super::files::Reader;
use super::render::{self, Renderer};
use super::{Installed, Kind};
use crate::error::{BmadError, Result};
use crate::phase::Phase;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What `baton validate` says about an installed skill or workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub name: String,
    /// `skill`, `rendered-skill`, `classic-workflow` or `step-workflow`.
    pub kind: &'static str,
    /// The same, in words.
    pub kind_name: &'static str,
    /// The folder, relative to the project.
    pub folder: String,
    /// The project it was read in.
    pub project: PathBuf,
    /// BMAD marks it deprecated (a shim); it is still a full workflow.
    pub shim: bool,
    /// The phases that run it by default when the project has it installed.
    pub default_for: Vec<Phase>,
    /// Whether this very folder is what those phases run in this project (a skill of the same
    /// name in an earlier tool folder would win).
    pub is_projects_default: bool,
    /// An interactive skill (it stops for a person at its checkpoints): the loop never picks
    /// it for an epic phase. Its unattended sibling, when BMAD has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactive: Option<Interactive>,
    /// `uv` (BMAD's `render_skill.py`, in the sandbox) or `baton`.
    pub renderer: &'static str,
    /// How it is rendered, in words.
    pub rendered: String,
    /// The configuration and customization files applied.
    pub applied: Vec<String>,
    /// Files placed in the run's `@pkg` folder.
    pub snapshot_files: usize,
    /// Length of the rendered text the run starts from.
    pub prompt_chars: usize,
    /// How a phase run of it is judged.
    pub judged_by: String,
    /// baton's rendering itself (what `baton validate --out` writes).
    #[serde(skip)]
    pub output: render::Rendered,
}

/// Why a skill is never an epic phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interactive {
    /// The skill to run unattended instead, if BMAD ships one.
    pub instead: Option<&'static str>,
}

/// BMAD's interactive skills that sit beside an epic phase's work, with their unattended
/// sibling: they stop for a person at their checkpoints, so the loop never picks them.
const INTERACTIVE: [(&str, Option<&str>); 1] = [("bmad-build", Some("bmad-build-auto"))];

fn interactive(name: &str) -> Option<Interactive> {
    INTERACTIVE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, instead)| Interactive { instead: *instead })
}

/// The project of `dir`: the nearest folder (itself included) holding `_bmad/`, `.bmad/` or
/// `bmad/bmm/`.
fn project_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| {
            a.join("_bmad").is_dir() || a.join(".bmad").is_dir() || a.join("bmad/bmm").is_dir()
        })
        .map(Path::to_path_buf)
}

fn kind_word(k: &Kind) -> &'static str {
    match k {
        Kind::Rendered => "rendered-skill",
        Kind::Plain => "skill",
        Kind::Classic { .. } => "classic-workflow",
        Kind::Steps => "step-workflow",
    }
}

/// How the loop judges a phase run of `inst` in `phase`.
pub fn judged_by(inst: &Installed, phase: Option<Phase>) -> String {
    match phase {
        Some(Phase::Build | Phase::Dev) if phase == Some(Phase::Build) || inst.name.contains("build") => "the status it writes into the story's spec frontmatter (done or review: built; blocked: the loop pauses with its blocking condition), then the verify commands and the git diff since the recorded baseline".into(),
        Some(Phase::Dev) => "the status it writes into the story file (review or done: built) or into sprint-status.yaml, then the verify commands and the git diff since the recorded baseline".into(),
        Some(Phase::CodeReview) => "the story's review.json when it writes one; else the status it sets in the story or spec file or in sprint-status.yaml (done approves; in-progress asks for changes, its Review Findings becoming the developer's instruction)".into(),
        Some(Phase::CreateStory) => "the story file it writes".into(),
        _ => "what the phase's contract asks (the story file, for the phases before dev)".into(),
    }
}

/// Describes the skill or workflow in `dir`; `None` when `dir` is neither (a package, or
/// anything else: the caller validates it as a package). `render_pref` is the renderer asked
/// for; without one, `configured(project)` gives the project's own choice (the epic's
/// `[autopilot] render`).
pub fn describe(
    dir: &Path,
    render_pref: Option<&str>,
    configured: &dyn Fn(&Path) -> Option<String>,
) -> Option<Result<Description>> {
    let dir = std::fs::canonicalize(dir).ok()?;
    if !dir.is_dir() || dir.join("bmad.json").exists() {
        return None;
    }
    let is_skill = dir.join("SKILL.md").is_file();
    let is_classic = dir.join("workflow.yaml").is_file() || dir.join("workflow.yml").is_file();
    if !is_skill && !is_classic {
        return None;
    }
    let root = project_of(&dir).or_else(|| dir.parent().map(Path::to_path_buf))?;
    let configured = configured(&root);
    Some(describe_in(
        &root,
        &dir,
        render_pref.or(configured.as_deref()),
    ))
}

fn describe_in(root: &Path, dir: &Path, render_pref: Option<&str>) -> Result<Description> {
    let rel = dir
        .strip_prefix(root)
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .unwrap_or_default();
    let reader = Reader::open(root)?;
    let inst = super::inspect(&reader, &rel)?.ok_or_else(|| {
        BmadError::usage(
            "EPIC_SKILL_INVALID",
            format!("{rel}: neither a BMAD skill nor a classic workflow"),
        )
    })?;
    let renderer = match inst.kind {
        Kind::Rendered => render::renderer(
            render_pref,
            std::env::var_os("PATH").as_deref(),
            reader.is_file(render::RENDER_SCRIPT),
        ),
        _ => Renderer::Baton(String::new()),
    };
    let why = match &renderer {
        Renderer::Baton(w) => w.clone(),
        Renderer::Uv => "BMAD's renderer failed".into(),
    };
    let rendered = render::render(&reader, &inst, &why).map_err(|e| {
        let mut e = e;
        if super::layers::central(&reader).is_ok_and(|c| c.files.is_empty()) {
            e.hint = Some(format!(
                "no BMAD configuration was found above {rel} (looked for _bmad/config.toml and _bmad/bmm/config.yaml in {}): validate the copy installed in a project",
                root.display()
            ));
        }
        e
    })?;
    let default_for: Vec<Phase> = Phase::ALL
        .into_iter()
        .filter(|p| super::defaults(*p).contains(&inst.name.as_str()))
        .collect();
    let is_projects_default = default_for.iter().any(|p| {
        super::default_for(&reader, *p)
            .ok()
            .flatten()
            .is_some_and(|d| d.rel == inst.rel)
    });
    let how = if inst.kind == Kind::Rendered && renderer == Renderer::Uv {
        format!(
            "rendered by BMAD's {} with uv, in the sandbox, when the phase starts (baton's own resolution checked here: {})",
            render::RENDER_SCRIPT,
            rendered.how
        )
    } else {
        rendered.how.clone()
    };
    Ok(Description {
        name: inst.name.clone(),
        kind: kind_word(&inst.kind),
        kind_name: inst.kind_name(),
        folder: inst.rel.clone(),
        project: root.to_path_buf(),
        shim: inst.shim,
        default_for: default_for.clone(),
        is_projects_default,
        interactive: interactive(&inst.name),
        renderer: if renderer == Renderer::Uv {
            "uv"
        } else {
            "baton"
        },
        rendered: how,
        applied: rendered.applied.clone(),
        snapshot_files: rendered.snapshot.len(),
        prompt_chars: rendered.text.chars().count(),
        judged_by: judged_by(&inst, default_for.first().copied()),
        output: rendered,
    })
}

impl Description {
    /// Writes baton's rendering into `dir` (created when missing): every rendered file as it
    /// would be placed in a run's `@pkg` folder, or `prompt.md` for a workflow without one (a
    /// classic workflow). Returns the files written, relative to `dir`.
    pub fn write_output(&self, dir: &Path) -> Result<Vec<String>> {
        let mut files: Vec<(String, &[u8])> = self
            .output
            .snapshot
            .iter()
            .map(|(n, b)| (n.clone(), b.as_slice()))
            .collect();
        if files.is_empty() {
            files.push(("prompt.md".into(), self.output.text.as_bytes()));
        }
        let mut written = Vec::new();
        for (name, bytes) in files {
            // Names come from the skill's folder listing; nothing may land outside `dir`.
            if name.starts_with('/')
                || name
                    .split('/')
                    .any(|p| p.is_empty() || p == "." || p == "..")
            {
                continue;
            }
            let path = dir.join(&name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(BmadError::io("create", parent))?;
            }
            std::fs::write(&path, bytes).map_err(BmadError::io("write", &path))?;
            written.push(name);
        }
        Ok(written)
    }

    /// What `baton validate` prints.
    pub fn text(&self) -> String {
        let mut out = format!("{} — {} `{}`\n", self.folder, self.kind_name, self.name);
        out.push_str(&format!("  project   {}\n", self.project.display()));
        let phases: Vec<&str> = self.default_for.iter().map(|p| p.as_str()).collect();
        let phase = match (phases.as_slice(), self.is_projects_default) {
            _ if self.interactive.is_some() => format!(
                "never picked as an epic phase: it is interactive, it stops for a person at its checkpoints{}",
                match self.interactive.as_ref().and_then(|i| i.instead) {
                    Some(other) => format!(" (the loop runs `{other}`, its unattended sibling)"),
                    None => String::new(),
                }
            ),
            ([], _) => format!(
                "no phase runs it by default; name it for one in baton.toml: [autopilot.phases.<phase>] skill = \"{}\"",
                self.folder
            ),
            (p, true) => format!("{} (the project's default for it)", p.join(", ")),
            (p, false) => format!(
                "{} by default when it is the first installed; here another copy comes first (name this one with skill = \"{}\")",
                p.join(", "),
                self.folder
            ),
        };
        out.push_str(&format!("  phase     {phase}\n"));
        out.push_str("  runs as   a baton task run: its rendered text as the prompt (project-relative paths), the project's file tools, sandboxed terminal and MCP, ended by phase.complete; resumable and recorded\n");
        out.push_str(&format!("  rendered  {}\n", self.rendered));
        if !self.applied.is_empty() {
            out.push_str(&format!("  values    {}\n", self.applied.join(", ")));
        }
        out.push_str(&format!(
            "  prompt    {} characters, {} files in @pkg\n",
            self.prompt_chars, self.snapshot_files
        ));
        out.push_str(&format!("  judged by {}\n", self.judged_by));
        if self.shim {
            out.push_str(
                "  note      BMAD marks it deprecated (a shim); it is still run as written\n",
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use baton_testkit::write_file as write;

    #[test]
    fn an_interactive_skill_is_never_an_epic_phase() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(root, "_bmad/config.toml", "[modules.bmm]\n");
        write(
            root,
            ".claude/skills/bmad-build/SKILL.md",
            "---\nname: bmad-build\n---\n# Build, with checkpoints\n",
        );
        let d = describe(
            &root.join(".claude/skills/bmad-build"),
            Some("baton"),
            &|_| None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            d.interactive,
            Some(Interactive {
                instead: Some("bmad-build-auto")
            })
        );
        let text = d.text();
        assert!(text.contains("never picked as an epic phase"), "{text}");
        assert!(text.contains("bmad-build-auto"), "{text}");
        assert!(!text.contains("name it for one"), "{text}");
    }

    #[test]
    fn a_skill_folder_within_its_project_and_a_package_is_not_described() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            "_bmad/config.toml",
            "[modules.bmm]\nimplementation_artifacts = \"{project-root}/impl\"\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/SKILL.md",
            "---\nname: bmad-build-auto\n---\nuv run render_skill.py\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/workflow.md",
            "Specs in {{.implementation_artifacts}}\n",
        );
        let d = describe(
            &root.join(".claude/skills/bmad-build-auto"),
            Some("baton"),
            &|_| None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.kind, "rendered-skill");
        assert_eq!(d.default_for, [Phase::Build]);
        assert!(d.is_projects_default);
        assert_eq!(d.renderer, "baton");
        assert_eq!(d.applied, ["_bmad/config.toml"]);
        assert!(
            d.text().contains("build (the project's default for it)"),
            "{}",
            d.text()
        );

        write(root, "pkg/bmad.json", "{}");
        assert!(describe(&root.join("pkg"), None, &|_| None).is_none());
        assert!(describe(&root.join("_bmad"), None, &|_| None).is_none());

        // Without the value it needs, it is refused with the reason.
        write(
            root,
            ".claude/skills/bmad-build-auto/step-01.md",
            "{{.missing_value}}\n",
        );
        let e = describe(
            &root.join(".claude/skills/bmad-build-auto"),
            Some("baton"),
            &|_| None,
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(e.code, "EPIC_SKILL_RENDER_FAILED");
        assert!(e.message.contains("missing_value"), "{e}");
    }
}
