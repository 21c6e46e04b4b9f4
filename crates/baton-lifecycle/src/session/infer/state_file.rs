//! `.workflow/state.json`, read and validated: the milestones (`phases`, `phase_slugs`), the
//! current milestone and the artifacts registry. Two shapes exist upstream (the 3.1 template
//! and the 2.0 TS type), so fields are optional, but a field that is present must have the
//! right type; a wrong one is an error naming it (`artifacts[3].phase`). Unknown fields are
//! ignored; unknown artifact types are kept and never match a stage.

use super::error::{InferError, Result};
use super::files::{self, MAX_STATE_BYTES};
use baton_autopilot::json_kind::json_kind;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// More than this many artifacts or milestones is refused (a bound, not a real limit).
pub const MAX_ENTRIES: usize = 100_000;
/// A phase number above this is not a phase (keeps arithmetic and questions sane).
pub const MAX_PHASE: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub path: PathBuf,
    pub current_milestone: Option<String>,
    pub milestones: Vec<Milestone>,
    /// In registry order.
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Milestone {
    pub id: String,
    pub status: Option<String>,
    /// `standard` (the default) or `adhoc` (self-contained: its completion ends the session).
    pub kind: Option<String>,
    pub phases: Vec<PhaseEntry>,
    /// phase number → slug.
    pub phase_slugs: BTreeMap<u64, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseEntry {
    pub number: u64,
    pub slug: Option<String>,
    pub status: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArtifactStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Position in the registry: the tie-break of equal `created_at`.
    pub order: usize,
    pub id: String,
    pub kind: String,
    pub milestone: Option<String>,
    pub phase: Option<u64>,
    pub scope: Option<String>,
    /// Relative to `.workflow/`, checked to be a plain relative path.
    pub path: Option<String>,
    pub status: ArtifactStatus,
    pub created_at: Option<String>,
}

impl Artifact {
    /// Newest-last ordering key: `created_at` (ISO strings sort by time; a missing one sorts
    /// first), then registry position.
    pub fn age_key(&self) -> (&str, usize) {
        (self.created_at.as_deref().unwrap_or(""), self.order)
    }

    /// A milestone-wide ("macro") analysis: scope `macro` as the seed writes it, or an analysis
    /// with no phase whose scope is absent or `milestone`.
    pub fn is_macro_analysis(&self) -> bool {
        self.kind == "analyze"
            && match self.scope.as_deref() {
                Some("macro") => true,
                None | Some("milestone") => self.phase.is_none(),
                _ => false,
            }
    }
}

impl State {
    /// The milestone with this id.
    pub fn milestone(&self, id: &str) -> Option<&Milestone> {
        self.milestones.iter().find(|m| m.id == id)
    }

    /// phase number → the first milestone listing it (D-007 without the fallback), built once
    /// so that lookups stay linear on a large registry.
    pub fn phase_milestones(&self) -> BTreeMap<u64, &str> {
        let mut index = BTreeMap::new();
        for m in &self.milestones {
            for n in m
                .phases
                .iter()
                .map(|p| p.number)
                .chain(m.phase_slugs.keys().copied())
            {
                index.entry(n).or_insert(m.id.as_str());
            }
        }
        index
    }

    /// Every phase number a milestone knows, from `phases` and `phase_slugs`.
    pub fn phases_of(m: &Milestone) -> Vec<u64> {
        let mut all: Vec<u64> = m.phases.iter().map(|p| p.number).collect();
        all.extend(m.phase_slugs.keys().copied());
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// Reads `.workflow/state.json`; `None` when it does not exist.
pub fn read(workflow: &Path) -> Result<Option<State>> {
    let path = workflow.join("state.json");
    let Some(doc) = files::read_json(&path, MAX_STATE_BYTES)? else {
        return Ok(None);
    };
    parse(&path, &doc).map(Some)
}

/// Validates a parsed state.json; `path` only locates errors.
pub fn parse(path: &Path, doc: &Value) -> Result<State> {
    let at = Loc { path };
    let root = doc.as_object().ok_or_else(|| {
        at.err(
            "(root)",
            format!("expected an object, got {}", json_kind(doc)),
        )
    })?;
    let current_milestone = at.opt_str(root, "current_milestone", "current_milestone")?;
    let milestones = match at.opt_array(root, "milestones", "milestones")? {
        None => Vec::new(),
        Some(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| milestone(&at, &format!("milestones[{i}]"), v))
            .collect::<Result<_>>()?,
    };
    let artifacts = match at.opt_array(root, "artifacts", "artifacts")? {
        None => Vec::new(),
        Some(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| artifact(&at, i, v))
            .collect::<Result<_>>()?,
    };
    Ok(State {
        path: path.to_path_buf(),
        current_milestone,
        milestones,
        artifacts,
    })
}

fn milestone(at: &Loc, loc: &str, v: &Value) -> Result<Milestone> {
    let obj = at.object(loc, v)?;
    let id = at
        .opt_str(obj, "id", &format!("{loc}.id"))?
        .ok_or_else(|| at.err(&format!("{loc}.id"), "missing (a milestone needs an id)"))?;
    let status = at.opt_str(obj, "status", &format!("{loc}.status"))?;
    let kind = at.opt_str(obj, "type", &format!("{loc}.type"))?;
    let phases = match at.opt_array(obj, "phases", &format!("{loc}.phases"))? {
        None => Vec::new(),
        Some(items) => items
            .iter()
            .enumerate()
            .map(|(i, p)| phase_entry(at, &format!("{loc}.phases[{i}]"), p))
            .collect::<Result<_>>()?,
    };
    let phase_slugs = slugs(at, &format!("{loc}.phase_slugs"), obj.get("phase_slugs"))?;
    Ok(Milestone {
        id,
        status,
        kind,
        phases,
        phase_slugs,
    })
}

/// `{"2": "auth"}` (number → slug), `{"auth": 2}` (slug → number) or `["2-auth", "3"]`.
fn slugs(at: &Loc, loc: &str, v: Option<&Value>) -> Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let here = format!("{loc}.{k}");
                match v {
                    Value::String(slug) => {
                        let n = phase_number_str(k)
                            .ok_or_else(|| at.err(&here, "the key must be a phase number"))?;
                        out.insert(n, slug.clone());
                    }
                    Value::Number(_) => {
                        let n = number(at, &here, v)?;
                        out.insert(n, k.clone());
                    }
                    other => {
                        return Err(at.err(
                            &here,
                            format!(
                                "expected a slug or a phase number, got {}",
                                json_kind(other)
                            ),
                        ));
                    }
                }
            }
        }
        Some(Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                let here = format!("{loc}[{i}]");
                let s = v.as_str().ok_or_else(|| {
                    at.err(&here, format!("expected a string, got {}", json_kind(v)))
                })?;
                let (n, slug) = numbered(s)
                    .ok_or_else(|| at.err(&here, "expected \"<number>\" or \"<number>-<slug>\""))?;
                out.insert(n, slug.unwrap_or_default());
            }
        }
        Some(other) => {
            return Err(at.err(loc, format!("expected an object, got {}", json_kind(other))));
        }
    }
    Ok(out)
}

/// A `phases[]` element: `2`, `"2"`, `"2-auth"` or `{number|phase|id|index, slug|name, status}`.
fn phase_entry(at: &Loc, loc: &str, v: &Value) -> Result<PhaseEntry> {
    match v {
        Value::Number(_) => Ok(PhaseEntry {
            number: number(at, loc, v)?,
            slug: None,
            status: None,
        }),
        Value::String(s) => {
            let (number, slug) = numbered(s)
                .ok_or_else(|| at.err(loc, "expected \"<number>\" or \"<number>-<slug>\""))?;
            Ok(PhaseEntry {
                number,
                slug,
                status: None,
            })
        }
        Value::Object(obj) => {
            let key = ["number", "phase", "id", "index"]
                .into_iter()
                .find(|k| obj.get(*k).is_some_and(|v| !v.is_null()))
                .ok_or_else(|| {
                    at.err(&format!("{loc}.number"), "missing (a phase needs a number)")
                })?;
            let here = format!("{loc}.{key}");
            let number = match &obj[key] {
                Value::String(s) => numbered(s)
                    .map(|(n, _)| n)
                    .ok_or_else(|| at.err(&here, "expected a phase number"))?,
                v => number(at, &here, v)?,
            };
            let slug = match at.opt_str(obj, "slug", &format!("{loc}.slug"))? {
                Some(s) => Some(s),
                None => at.opt_str(obj, "name", &format!("{loc}.name"))?,
            };
            let status = at.opt_str(obj, "status", &format!("{loc}.status"))?;
            Ok(PhaseEntry {
                number,
                slug,
                status,
            })
        }
        other => Err(at.err(
            loc,
            format!(
                "expected a phase number or object, got {}",
                json_kind(other)
            ),
        )),
    }
}

fn artifact(at: &Loc, i: usize, v: &Value) -> Result<Artifact> {
    let loc = format!("artifacts[{i}]");
    let obj = at.object(&loc, v)?;
    let need = |key: &str| -> Result<String> {
        at.opt_str(obj, key, &format!("{loc}.{key}"))?
            .ok_or_else(|| at.err(&format!("{loc}.{key}"), "missing"))
    };
    let id = need("id")?;
    let kind_ = need("type")?;
    let status_raw = need("status")?;
    let status = match status_raw.as_str() {
        "pending" => ArtifactStatus::Pending,
        "in_progress" => ArtifactStatus::InProgress,
        "completed" => ArtifactStatus::Completed,
        "failed" => ArtifactStatus::Failed,
        other => {
            return Err(at.err(
                &format!("{loc}.status"),
                format!("expected pending, in_progress, completed or failed, got {other:?}"),
            ));
        }
    };
    let phase = match obj.get("phase") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            phase_number_str(s)
                .ok_or_else(|| at.err(&format!("{loc}.phase"), "expected a phase number"))?,
        ),
        Some(v) => Some(number(at, &format!("{loc}.phase"), v)?),
    };
    let path = at.opt_str(obj, "path", &format!("{loc}.path"))?;
    if let Some(p) = &path
        && !files::is_plain_relative(p)
    {
        return Err(InferError::PathOutside {
            path: at.path.to_path_buf(),
            field: format!("{loc}.path"),
            value: p.clone(),
        });
    }
    Ok(Artifact {
        order: i,
        id,
        kind: kind_,
        milestone: at.opt_str(obj, "milestone", &format!("{loc}.milestone"))?,
        phase,
        scope: at.opt_str(obj, "scope", &format!("{loc}.scope"))?,
        path,
        status,
        created_at: at.opt_str(obj, "created_at", &format!("{loc}.created_at"))?,
    })
}

/// `"2"` → 2 (digits only, bounded).
pub fn phase_number_str(s: &str) -> Option<u64> {
    let t = s.trim();
    if t.is_empty() || t.len() > 7 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok().filter(|n| *n <= MAX_PHASE)
}

/// `"2"` → (2, None); `"2-auth"` → (2, Some("auth")).
fn numbered(s: &str) -> Option<(u64, Option<String>)> {
    match s.split_once('-') {
        Some((n, slug)) => Some((phase_number_str(n)?, Some(slug.to_string()))),
        None => Some((phase_number_str(s)?, None)),
    }
}

fn number(at: &Loc, loc: &str, v: &Value) -> Result<u64> {
    v.as_u64().filter(|n| *n <= MAX_PHASE).ok_or_else(|| {
        at.err(
            loc,
            format!(
                "expected a phase number (0..={MAX_PHASE}), got {}",
                short(v)
            ),
        )
    })
}

/// A value for an error message, cut short.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// Locates errors in one file.
struct Loc<'a> {
    path: &'a Path,
}

impl Loc<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> InferError {
        InferError::field(self.path, field, message)
    }

    fn object<'v>(&self, loc: &str, v: &'v Value) -> Result<&'v Map<String, Value>> {
        v.as_object()
            .ok_or_else(|| self.err(loc, format!("expected an object, got {}", json_kind(v))))
    }

    fn opt_str(&self, obj: &Map<String, Value>, key: &str, loc: &str) -> Result<Option<String>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.err(loc, format!("expected a string, got {}", json_kind(v)))),
        }
    }

    fn opt_array<'v>(
        &self,
        obj: &'v Map<String, Value>,
        key: &str,
        loc: &str,
    ) -> Result<Option<&'v Vec<Value>>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) if a.len() > MAX_ENTRIES => Err(self.err(
                loc,
                format!("{} entries, over the limit of {MAX_ENTRIES}", a.len()),
            )),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.err(loc, format!("expected an array, got {}", json_kind(v)))),
        }
    }
}
