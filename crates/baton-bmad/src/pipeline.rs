//! Which phases the project's own BMAD method runs a story through, read from what is
//! installed — what a BMAD user of that version would run by hand:
//!
//! - **BMAD 6.11+** (`bmad-build-auto` or `bmad-build` installed): `build` then `code-review`.
//!   Build plans, implements and reviews in one skill; BMAD calls code review "an optional extra
//!   check after Build's built-in review", and baton keeps it as the check that ends a story.
//!   `bmad-create-story` and `bmad-dev-story` are deprecated shims there: not used.
//! - **Classic (6.0–6.10)**: `create-story`, `validate` (when the method lists create-story's
//!   validate action in its `module-help.csv`), `dev` (`dev-story`), `code-review`.
//! - **No method installed**: seed 004's five phases, run by baton's bundled package.
//!
//! The epic turns these phase names into its stages (`baton_epic::pipeline`); a
//! `[autopilot] pipeline` in baton.toml overrides the detection.

use crate::error::Result;
use crate::method::{self, Installed, files::Reader};
use crate::phase::Phase;
use serde::{Deserialize, Serialize};

/// Where a pipeline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    #[serde(rename = "bmad-6.11+")]
    Bmad611,
    #[serde(rename = "bmad-classic")]
    Classic,
    #[serde(rename = "bundled")]
    Bundled,
    #[serde(rename = "config")]
    Config,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Bmad611 => "bmad-6.11+",
            Source::Classic => "bmad-classic",
            Source::Bundled => "bundled",
            Source::Config => "config",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One phase of the method's pipeline and the installed skill BMAD runs it with, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodPhase {
    pub phase: Phase,
    /// The installed skill or workflow's name for this phase (`None`: baton's bundled one).
    pub skill: Option<String>,
    /// The skill's action when it has several (`validate` of `bmad-create-story`).
    pub action: Option<String>,
}

/// The pipeline the installed method implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    pub source: Source,
    /// Why, in one sentence naming what was found.
    pub reason: String,
    pub phases: Vec<MethodPhase>,
}

/// Where installers put BMAD's help table of a module's skills (the order and the optional
/// steps of its phases).
pub const MODULE_HELP: &[&str] = &[
    "_bmad/bmm/module-help.csv",
    ".bmad/bmm/module-help.csv",
    "bmad/bmm/module-help.csv",
];

fn named(inst: &Option<Installed>) -> Option<String> {
    inst.as_ref().map(|i| i.name.clone())
}

/// A non-shim skill or classic workflow of one of `names`.
fn first_real(reader: &Reader, names: &[&str]) -> Result<Option<Installed>> {
    for name in names {
        if let Some(found) = method::find(reader, name)?
            && !found.shim
        {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Whether the method lists create-story's validate action (`bmad-create-story:validate` in
/// the help table, or a classic `validate-create-story` workflow).
fn has_validate_step(reader: &Reader) -> Result<bool> {
    for rel in MODULE_HELP {
        if let Some(text) = reader.text(rel)? {
            let listed = text.lines().any(|line| {
                let cells: Vec<&str> = line.split(',').map(str::trim).collect();
                cells.get(1).is_some_and(|s| *s == "bmad-create-story")
                    && cells.iter().any(|c| c.eq_ignore_ascii_case("validate"))
            });
            if listed {
                return Ok(true);
            }
        }
    }
    Ok(method::find(reader, "validate-create-story")?.is_some())
}

/// The pipeline the project's installed method implies.
pub fn detect(reader: &Reader) -> Result<Detected> {
    let build_auto = method::find(reader, "bmad-build-auto")?;
    let build = method::find(reader, "bmad-build")?;
    let review = first_real(reader, method::defaults(Phase::CodeReview))?;
    let review_note = match &review {
        Some(r) => format!("code review runs `{}`", r.name),
        None => "no code-review skill is installed: baton's bundled review ends each story".into(),
    };
    if build_auto.is_some() || build.is_some() {
        let reason = match (&build_auto, &build) {
            (Some(a), _) => format!(
                "`{}` is installed ({}): BMAD 6.11+ builds a story in one skill that plans, implements and reviews it; {review_note}",
                a.name, a.rel
            ),
            (None, Some(b)) => format!(
                "`{}` is installed ({}) without `bmad-build-auto`: BMAD 6.11+, but bmad-build stops for a person at its checkpoints, so baton's bundled dev workflow builds each story; {review_note}",
                b.name, b.rel
            ),
            (None, None) => String::new(),
        };
        return Ok(Detected {
            source: Source::Bmad611,
            reason,
            phases: vec![
                MethodPhase {
                    phase: Phase::Build,
                    skill: named(&build_auto),
                    action: None,
                },
                MethodPhase {
                    phase: Phase::CodeReview,
                    skill: named(&review),
                    action: None,
                },
            ],
        });
    }
    let create = first_real(reader, method::defaults(Phase::CreateStory))?;
    let dev = first_real(reader, method::defaults(Phase::Dev))?;
    if create.is_some() || dev.is_some() {
        let validate = create.is_some() && has_validate_step(reader)?;
        let shown = |i: &Option<Installed>| {
            i.as_ref().map_or("baton's bundled one".to_string(), |i| {
                format!("`{}`", i.name)
            })
        };
        let mut phases = vec![MethodPhase {
            phase: Phase::CreateStory,
            skill: named(&create),
            action: None,
        }];
        if validate {
            phases.push(MethodPhase {
                phase: Phase::Validate,
                skill: named(&create),
                action: Some("validate".into()),
            });
        }
        phases.push(MethodPhase {
            phase: Phase::Dev,
            skill: named(&dev),
            action: None,
        });
        phases.push(MethodPhase {
            phase: Phase::CodeReview,
            skill: named(&review),
            action: None,
        });
        return Ok(Detected {
            source: Source::Classic,
            reason: format!(
                "BMAD's classic story cycle is installed (create-story: {}, dev: {}): create-story{} → dev-story → code-review; {review_note}",
                shown(&create),
                shown(&dev),
                if validate {
                    " → validate (its validate action, listed in the method's help table)"
                } else {
                    ""
                }
            ),
            phases,
        });
    }
    Ok(Detected {
        source: Source::Bundled,
        reason: "no BMAD implementation skill or workflow is installed: baton's bundled five phases (create-story → validate → dev → revision → code-review)".into(),
        phases: [
            Phase::CreateStory,
            Phase::Validate,
            Phase::Dev,
            Phase::Revision,
            Phase::CodeReview,
        ]
        .into_iter()
        .map(|phase| MethodPhase {
            phase,
            skill: None,
            action: None,
        })
        .collect(),
    })
}

/// BMAD's unattended build refuses any other value of these settings (`[workflow]` of its
/// customization layers): name, allowed values.
pub const BUILD_SETTINGS: &[(&str, &[&str])] = &[
    ("route", &["oneshot", "full", "auto"]),
    ("commit", &["auto", "stage", "handoff"]),
    ("review", &["none", "quick", "thorough", "auto"]),
];

/// The build skill's settings as its customization layers set them (`workflow.<name>` =
/// value), each checked against what BMAD accepts: a value it would halt on is refused here,
/// before anything runs, naming the layers.
pub fn build_settings(reader: &Reader, inst: &Installed) -> Result<Vec<(String, String)>> {
    let layers = method::layers::customization(reader, &inst.rel, &inst.name)?;
    let mut out = Vec::new();
    for (name, allowed) in BUILD_SETTINGS {
        let Some(value) = method::layers::lookup(&layers.table, &format!("workflow.{name}")) else {
            continue;
        };
        let text = value.as_str().map(str::to_owned);
        let shown = text
            .as_ref()
            .map_or_else(|| format!("{value:?}"), |t| format!("{t:?}"));
        match text {
            Some(v) if allowed.contains(&v.as_str()) => out.push((name.to_string(), v)),
            _ => {
                return Err(crate::error::BmadError::usage(
                    "EPIC_BUILD_SETTING_INVALID",
                    format!(
                        "{}: workflow.{name} = {shown} is not one of {} (set in {}); BMAD's {} halts on it",
                        inst.name,
                        allowed.join(", "),
                        if layers.files.is_empty() {
                            "its customization".to_string()
                        } else {
                            layers.files.join(" < ")
                        },
                        inst.name
                    ),
                )
                .hint(format!(
                    "set workflow.{name} to one of {} in _bmad/custom/{}.toml",
                    allowed.join(", "),
                    inst.name
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_testkit::write_file as write;

    fn names(d: &Detected) -> Vec<&'static str> {
        d.phases.iter().map(|p| p.phase.as_str()).collect()
    }

    #[test]
    fn each_generation_of_bmad_gets_its_own_pipeline() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let r = Reader::open(root).unwrap();
        let none = detect(&r).unwrap();
        assert_eq!(none.source, Source::Bundled);
        assert_eq!(
            names(&none),
            ["create-story", "validate", "dev", "revision", "code-review"]
        );

        // Classic (6.10): create-story with its validate action listed, dev-story, code-review.
        write(
            root,
            ".claude/skills/bmad-create-story/SKILL.md",
            "---\nname: bmad-create-story\n---\n# Create\n",
        );
        write(
            root,
            ".claude/skills/bmad-dev-story/SKILL.md",
            "---\nname: bmad-dev-story\n---\n# Dev\n",
        );
        write(
            root,
            ".claude/skills/bmad-code-review/SKILL.md",
            "---\nname: bmad-code-review\n---\n# Review\n",
        );
        let classic = detect(&r).unwrap();
        assert_eq!(classic.source, Source::Classic);
        assert_eq!(names(&classic), ["create-story", "dev", "code-review"]);
        write(
            root,
            "_bmad/bmm/module-help.csv",
            "module,skill,display-name,menu-code,description,action\nBMad Method,bmad-create-story,Validate Story,VS,Validates story readiness.,validate\n",
        );
        let classic = detect(&r).unwrap();
        assert_eq!(
            names(&classic),
            ["create-story", "validate", "dev", "code-review"]
        );
        assert_eq!(classic.phases[1].action.as_deref(), Some("validate"));
        assert_eq!(
            classic.phases[1].skill.as_deref(),
            Some("bmad-create-story")
        );

        // 6.11+: build-auto wins; the deprecated shims beside it are not used.
        write(
            root,
            ".claude/skills/bmad-build-auto/SKILL.md",
            "---\nname: bmad-build-auto\n---\n# Build\n",
        );
        let modern = detect(&r).unwrap();
        assert_eq!(modern.source, Source::Bmad611);
        assert_eq!(names(&modern), ["build", "code-review"]);
        assert_eq!(modern.phases[0].skill.as_deref(), Some("bmad-build-auto"));
        assert!(
            modern.reason.contains("bmad-build-auto"),
            "{}",
            modern.reason
        );
    }

    #[test]
    fn only_shims_of_the_classic_skills_are_not_a_classic_method() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            ".claude/skills/bmad-dev-story/SKILL.md",
            "---\nname: bmad-dev-story\nmetadata:\n  lifecycle: shim\n---\n# Dev\n",
        );
        let d = detect(&Reader::open(root).unwrap()).unwrap();
        assert_eq!(d.source, Source::Bundled);
    }

    #[test]
    fn a_build_setting_bmad_would_halt_on_is_refused_with_its_layer() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            ".claude/skills/bmad-build-auto/SKILL.md",
            "---\nname: bmad-build-auto\n---\n# Build\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/customize.toml",
            "[workflow]\nroute = \"auto\"\ncommit = \"auto\"\n",
        );
        let r = Reader::open(root).unwrap();
        let inst = method::find(&r, "bmad-build-auto").unwrap().unwrap();
        assert_eq!(
            build_settings(&r, &inst).unwrap(),
            [
                ("route".to_string(), "auto".to_string()),
                ("commit".to_string(), "auto".to_string())
            ]
        );
        write(
            root,
            "_bmad/custom/bmad-build-auto.toml",
            "[workflow]\nreview = \"paranoid\"\n",
        );
        let e = build_settings(&r, &inst).unwrap_err();
        assert_eq!(e.code, "EPIC_BUILD_SETTING_INVALID");
        assert!(e.message.contains("workflow.review"), "{}", e.message);
        assert!(
            e.message.contains("_bmad/custom/bmad-build-auto.toml"),
            "{}",
            e.message
        );
    }
}
