//! The project's BMAD method as the epic started with it: which installed skill or workflow
//! each phase runs, and a sha256 digest of every file its rendering reads (the skill's folder,
//! the configuration and customization layers, BMAD's render script), absent files included.
//! It is taken when the epic starts and kept in `.baton-epic-method.json`, beside the loop's
//! other files (only the orchestrator writes it; a durable replace). Before each phase the loop
//! takes it again: a file that changed, appeared or disappeared since, or a phase that would now
//! run another method, is never used silently (see [`crate::method_consent`]).
//!
//! The same paths are what phase runs may not write ([`protected_paths`]): a phase's model is
//! not to write the instructions of the phases after it.

use super::files::{self, Reader};
use super::layers;
use super::{CLASSIC_ROOTS, Kind, SKILL_FOLDERS};
use crate::config::AutopilotConfig;
use crate::error::{EpicError, Result};
use crate::pipeline::Recorded;
use baton_autopilot::untrusted::limit;
use baton_bmad::layout::Artifacts;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

pub const FILE_NAME: &str = ".baton-epic-method.json";
const VERSION: u32 = 1;
/// At most this many files are named in a message (the rest are counted).
const SHOWN: usize = 8;

/// Folders of the method no phase run writes, besides every tool's skill folder and the
/// classic workflow roots: the customization layers, BMAD's scripts (its renderer) and the
/// classic workflows' engine.
const METHOD_FOLDERS: [&str; 3] = ["_bmad/custom", "_bmad/scripts", "_bmad/core/tasks"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MethodSnapshot {
    pub version: u32,
    pub epic_id: String,
    pub taken_at: String,
    /// Each phase's installed method (its folder), `""` for a package (the bundled one
    /// included), or `error: CODE` when it could not be read.
    pub phases: BTreeMap<String, String>,
    /// Project-relative file → sha256 (hex) of its bytes; `None`: it did not exist.
    pub files: BTreeMap<String, Option<String>>,
    /// The pipeline the method implied (or baton.toml set) when the snapshot was taken: the
    /// epic runs the recorded one until a person accepts a change. Absent in older snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<Recorded>,
}

/// One difference between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Changed(String),
    Appeared(String),
    Disappeared(String),
    /// The method now implies another pipeline (`a → b (source)`).
    Pipeline {
        was: String,
        now: String,
    },
    /// A phase would run another method (`""`: a package).
    Chosen {
        phase: String,
        was: String,
        now: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |m: &str| {
            if m.is_empty() {
                "its package".to_string()
            } else {
                m.to_string()
            }
        };
        match self {
            Change::Changed(p) => write!(f, "{p} (changed)"),
            Change::Appeared(p) => write!(f, "{p} (appeared)"),
            Change::Disappeared(p) => write!(f, "{p} (disappeared)"),
            Change::Pipeline { was, now } => {
                write!(f, "the pipeline would be {now} instead of {was}")
            }
            Change::Chosen { phase, was, now } => {
                write!(
                    f,
                    "{phase} would run {} instead of {}",
                    shown(now),
                    shown(was)
                )
            }
        }
    }
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A file's digest; one that cannot be read (a FIFO, a link out, too large) gets a digest no
/// file has, so it counts as changed.
fn file_digest(reader: &Reader, rel: &str) -> Option<String> {
    match reader.bytes(rel, files::MAX_FILE) {
        Ok(Some(bytes)) => Some(digest(&bytes)),
        Ok(None) => None,
        Err(e) => Some(format!("unreadable: {}", e.code)),
    }
}

impl MethodSnapshot {
    /// The method of `project` under `config`, now.
    pub fn take(config: &AutopilotConfig, project: &Path, epic_id: &str) -> Result<MethodSnapshot> {
        let reader = Reader::open(project)?;
        let pipeline = crate::pipeline::Pipeline::for_project(config, project)?;
        let mut phases = BTreeMap::new();
        let mut wanted: Vec<String> = layers::CENTRAL
            .iter()
            .chain(layers::FLAT.iter())
            .map(|s| s.to_string())
            .collect();
        for stage in pipeline.stages() {
            let phase = stage.phase;
            let chosen = match crate::specs::installed_for(config, stage, &reader) {
                Ok(Some((inst, _))) => {
                    for f in reader.files(&inst.rel) {
                        wanted.push(files::join(&inst.rel, &f));
                    }
                    wanted.push(format!("{}/customize.toml", inst.rel));
                    wanted.push(format!("_bmad/custom/{}.toml", inst.name));
                    wanted.push(format!("_bmad/custom/{}.user.toml", inst.name));
                    if inst.kind == Kind::Rendered {
                        wanted.push(super::render::RENDER_SCRIPT.to_string());
                    }
                    inst.rel
                }
                Ok(None) => String::new(),
                Err(e) => format!("error: {}", e.code),
            };
            phases.insert(phase.as_str().to_string(), chosen);
        }
        let files = wanted
            .into_iter()
            .map(|rel| {
                let d = file_digest(&reader, &rel);
                (rel, d)
            })
            .collect();
        Ok(MethodSnapshot {
            version: VERSION,
            epic_id: epic_id.to_string(),
            taken_at: baton_store::time::now_rfc3339(),
            phases,
            files,
            pipeline: Some(pipeline.record()),
        })
    }

    /// The snapshot kept in the artifacts folder, if any.
    pub fn load(dir: &Artifacts, shown_dir: &str) -> Result<Option<MethodSnapshot>> {
        let shown = format!("{shown_dir}/{FILE_NAME}");
        let Some(bytes) = dir.file(FILE_NAME).read(limit::STATUS)? else {
            return Ok(None);
        };
        let snap: MethodSnapshot = serde_json::from_slice(&bytes).map_err(|e| {
            EpicError::invalid_file("EPIC_METHOD_SNAPSHOT_INVALID", &shown, None, e).hint(
                "this file is baton's own; remove it to take a new snapshot of the project's BMAD method",
            )
        })?;
        if snap.version != VERSION {
            return Err(EpicError::invalid_file(
                "EPIC_METHOD_SNAPSHOT_INVALID",
                &shown,
                Some("/version"),
                format!("is {}, this baton reads {VERSION}", snap.version),
            ));
        }
        Ok(Some(snap))
    }

    /// Written durably (temp file, fsync, rename, fsync of the folder).
    pub fn save(&self, dir: &Artifacts) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
        bytes.push(b'\n');
        dir.file(FILE_NAME).write(&bytes)
    }

    /// What differs in `now` from this snapshot: phases first, then files by path.
    pub fn changes(&self, now: &MethodSnapshot) -> Vec<Change> {
        let mut out = Vec::new();
        if let (Some(was), Some(is)) = (&self.pipeline, &now.pipeline)
            && (was.source, names(was)) != (is.source, names(is))
        {
            out.push(Change::Pipeline {
                was: was.arrow(),
                now: is.arrow(),
            });
        }
        for (phase, was) in &self.phases {
            let is = now.phases.get(phase).cloned().unwrap_or_default();
            if *was != is {
                out.push(Change::Chosen {
                    phase: phase.clone(),
                    was: was.clone(),
                    now: is,
                });
            }
        }
        let mut paths: Vec<&String> = self.files.keys().chain(now.files.keys()).collect();
        paths.sort();
        paths.dedup();
        for path in paths {
            let was = self.files.get(path).cloned().flatten();
            let is = now.files.get(path).cloned().flatten();
            match (was, is) {
                (Some(a), Some(b)) if a != b => out.push(Change::Changed(path.clone())),
                (None, Some(_)) => out.push(Change::Appeared(path.clone())),
                (Some(_), None) => out.push(Change::Disappeared(path.clone())),
                _ => {}
            }
        }
        out
    }
}

fn names(r: &Recorded) -> Vec<&str> {
    r.phases.iter().map(|p| p.name.as_str()).collect()
}

/// `changes` in one line, at most [`SHOWN`] of them named.
pub fn describe(changes: &[Change]) -> String {
    let mut shown: Vec<String> = changes.iter().take(SHOWN).map(|c| c.to_string()).collect();
    if changes.len() > SHOWN {
        shown.push(format!("and {} more", changes.len() - SHOWN));
    }
    shown.join(", ")
}

/// Project-relative paths no phase run may write: every tool's skill folder, the classic
/// workflow roots, the configuration and customization layers, BMAD's scripts, the folders of
/// the methods `chosen` (a `skill = "<folder>"` may name any), and the snapshot itself (in the
/// artifacts folder `artifacts_rel`).
pub fn protected_paths(artifacts_rel: &str, chosen: &[String]) -> Vec<String> {
    let mut out: Vec<String> = SKILL_FOLDERS
        .iter()
        .chain(CLASSIC_ROOTS.iter())
        .chain(METHOD_FOLDERS.iter())
        .chain(layers::CENTRAL.iter())
        .chain(layers::FLAT.iter())
        .map(|s| s.to_string())
        .collect();
    out.extend(chosen.iter().filter(|c| !c.is_empty()).cloned());
    let artifacts = artifacts_rel.trim_matches('/');
    out.push(if artifacts.is_empty() || artifacts == "." {
        FILE_NAME.to_string()
    } else {
        format!("{artifacts}/{FILE_NAME}")
    });
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use baton_testkit::write_file as write;

    #[test]
    fn a_changed_layer_and_a_new_skill_are_told_apart_from_the_snapshot() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            ".agents/skills/bmad-build-auto/SKILL.md",
            "---\nname: bmad-build-auto\n---\n# Build\n",
        );
        write(root, "_bmad/config.toml", "[core]\nx = 1\n");
        let config = AutopilotConfig::default();
        let first = MethodSnapshot::take(&config, root, "epic-1").unwrap();
        assert_eq!(first.phases["build"], ".agents/skills/bmad-build-auto");
        assert_eq!(
            first.pipeline.as_ref().unwrap().arrow(),
            "build → code-review (bmad-6.11+)"
        );
        assert_eq!(first.phases["code-review"], "");
        assert!(first.files["_bmad/custom/bmad-build-auto.toml"].is_none());
        let same = MethodSnapshot::take(&config, root, "epic-1").unwrap();
        assert!(first.changes(&same).is_empty());

        write(
            root,
            "_bmad/custom/bmad-build-auto.toml",
            "[workflow]\npersistent_facts = [\"pre-approved\"]\n",
        );
        write(root, "_bmad/config.toml", "[core]\nx = 2\n");
        write(
            root,
            ".claude/skills/bmad-code-review/SKILL.md",
            "---\nname: bmad-code-review\n---\n# Approve\n",
        );
        let now = MethodSnapshot::take(&config, root, "epic-1").unwrap();
        let changes = first.changes(&now);
        assert_eq!(
            changes,
            vec![
                Change::Chosen {
                    phase: "code-review".into(),
                    was: String::new(),
                    now: ".claude/skills/bmad-code-review".into()
                },
                Change::Appeared(".claude/skills/bmad-code-review/SKILL.md".into()),
                Change::Changed("_bmad/config.toml".into()),
                Change::Appeared("_bmad/custom/bmad-build-auto.toml".into()),
            ]
        );
        let line = describe(&changes);
        assert!(
            line.starts_with(
                "code-review would run .claude/skills/bmad-code-review instead of its package"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_protected_paths_cover_every_tool_folder_and_the_snapshot() {
        let p = protected_paths("impl", &["tools/my-review".to_string()]);
        for want in [
            ".claude/skills",
            ".cursor/skills",
            ".agents/skills",
            "_bmad/custom",
            "_bmad/scripts",
            "_bmad/bmm/workflows/4-implementation",
            "_bmad/config.toml",
            "tools/my-review",
            "impl/.baton-epic-method.json",
        ] {
            assert!(p.iter().any(|x| x == want), "{want} missing from {p:?}");
        }
        assert!(!p.iter().any(|x| x.starts_with("_bmad/render")));
    }
}
