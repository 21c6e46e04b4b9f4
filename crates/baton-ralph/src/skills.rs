//! `skills`: the command and skill files a session can run (maestro v0.5's sources).
//!
//! | source | type | scope | platform |
//! |---|---|---|---|
//! | `~/.claude/commands/*.md`, `<project>/.claude/commands/*.md` | command | global, project | claude |
//! | `~/.claude/skills/*/SKILL.md`, `<project>/.claude/skills/*/SKILL.md` | skill | global, project | claude |
//! | `~/.codex/skills/*/SKILL.md`, `<project>/.codex/skills/*/SKILL.md` | skill | global, project | codex |
//! | `~/.agents/skills/*/SKILL.md`, `<project>/.agents/skills/*/SKILL.md` | skill | global, project | agent |
//! | `~/.agy/skills/*/SKILL.md`, `<project>/.agy/skills/*/SKILL.md` | skill | global, project | agy |
//!
//! (maestro v0.5.0 added the last two.)
//!
//! The name is the frontmatter `name`, else the file (command) or folder (skill) name. Project
//! overrides global per `platform::type::name`, and both override baton's bundled lifecycle
//! commands (scope `bundled`, claude platform), which are listed only when the context names
//! them ([`Context::bundled_commands`], set by `baton session`).

use super::context::Context;
use super::manifest::Manifest;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// maestro v0.5's platforms: claude, codex, the open Agent Skills standard (`.agents/`) and
/// Antigravity (`.agy/`).
pub const PLATFORMS: [&str; 4] = ["claude", "codex", "agent", "agy"];

#[derive(Debug, Clone, Serialize)]
pub struct SkillEntry {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub scope: &'static str,
    pub platform: &'static str,
    pub name: String,
    pub path: PathBuf,
    pub hint: String,
    pub description: String,
    pub required: usize,
    pub deferred: usize,
    pub missing_required: Vec<String>,
}

struct Source {
    dir: PathBuf,
    kind: &'static str,
    scope: &'static str,
    platform: &'static str,
}

/// Every effective entry, sorted by platform, type, scope, name.
pub fn scan(ctx: &Context, platform: Option<&str>) -> Vec<SkillEntry> {
    let p = &ctx.project;
    let mut sources = Vec::new();
    let mut add = |dir: Option<PathBuf>, kind, scope, platform| {
        // Without a home directory there are no global sources (an empty home would make
        // them relative paths, i.e. the project again).
        if let Some(dir) = dir {
            sources.push(Source {
                dir,
                kind,
                scope,
                platform,
            })
        }
    };
    let global = |rel: &str| ctx.home.as_ref().map(|h| h.join(rel));
    add(global(".claude/commands"), "command", "global", "claude");
    add(
        Some(p.join(".claude/commands")),
        "command",
        "project",
        "claude",
    );
    add(global(".claude/skills"), "skill", "global", "claude");
    add(Some(p.join(".claude/skills")), "skill", "project", "claude");
    add(global(".codex/skills"), "skill", "global", "codex");
    add(Some(p.join(".codex/skills")), "skill", "project", "codex");
    add(global(".agents/skills"), "skill", "global", "agent");
    add(Some(p.join(".agents/skills")), "skill", "project", "agent");
    add(global(".agy/skills"), "skill", "global", "agy");
    add(Some(p.join(".agy/skills")), "skill", "project", "agy");
    add(
        ctx.bundled_commands.clone(),
        "command",
        super::bundled_skills::SCOPE,
        "claude",
    );

    let mut merged: BTreeMap<String, SkillEntry> = BTreeMap::new();
    for src in sources
        .iter()
        .filter(|s| platform.is_none_or(|p| p == s.platform))
    {
        let files = if src.kind == "command" {
            command_files(&src.dir)
        } else {
            skill_files(&src.dir)
        };
        for (file, fallback) in files {
            let entry = entry(ctx, src, &file, fallback);
            let key = format!("{}::{}::{}", entry.platform, entry.kind, entry.name);
            let replace = merged
                .get(&key)
                .is_none_or(|old| rank(entry.scope) > rank(old.scope));
            if replace {
                merged.insert(key, entry);
            }
        }
    }
    let mut out: Vec<SkillEntry> = merged.into_values().collect();
    out.sort_by(|a, b| {
        (a.platform, a.kind, a.scope)
            .cmp(&(b.platform, b.kind, b.scope))
            .then_with(|| collate(&a.name, &b.name))
    });
    out
}

/// Which scope wins when two sources have a skill of the same name: the project, then the
/// user's home, then baton's bundled files.
fn rank(scope: &str) -> u8 {
    match scope {
        "project" => 2,
        "global" => 1,
        _ => 0,
    }
}

/// Case-insensitive first, like `localeCompare` on plain names.
fn collate(a: &str, b: &str) -> std::cmp::Ordering {
    a.to_lowercase()
        .cmp(&b.to_lowercase())
        .then_with(|| a.cmp(b))
}

fn entry(ctx: &Context, src: &Source, file: &Path, fallback: String) -> SkillEntry {
    let base = SkillEntry {
        kind: src.kind,
        scope: src.scope,
        platform: src.platform,
        name: fallback,
        path: file.to_path_buf(),
        hint: String::new(),
        description: "(parse error)".into(),
        required: 0,
        deferred: 0,
        missing_required: Vec::new(),
    };
    match Manifest::load(file, ctx.home.as_deref()) {
        Ok(m) => {
            let name = m.name();
            SkillEntry {
                name: if name.is_empty() { base.name } else { name },
                hint: m.frontmatter.text("argument-hint"),
                description: m.frontmatter.text("description"),
                required: m.required.len(),
                deferred: m.deferred.len(),
                missing_required: m.missing_required(),
                ..base
            }
        }
        Err(_) => base,
    }
}

fn sorted_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// `dir/*.md` files, with the name they fall back to.
fn command_files(dir: &Path) -> Vec<(PathBuf, String)> {
    sorted_names(dir)
        .into_iter()
        .filter_map(|name| {
            let stem = name.strip_suffix(".md")?.to_string();
            let path = dir.join(&name);
            path.is_file().then_some((path, stem))
        })
        .collect()
}

/// `dir/*/SKILL.md` files, with the folder name they fall back to.
fn skill_files(dir: &Path) -> Vec<(PathBuf, String)> {
    sorted_names(dir)
        .into_iter()
        .filter_map(|name| {
            let path = dir.join(&name).join("SKILL.md");
            path.is_file().then_some((path, name))
        })
        .collect()
}

/// The entry a step named `skill` runs: the command of that name, else the skill.
pub fn find<'a>(entries: &'a [SkillEntry], skill: &str) -> Option<&'a SkillEntry> {
    entries.iter().find(|e| e.name == skill)
}

/// maestro's table: `TYPE SCOPE NAME HINT REQ DEF`, one line per entry, a count line.
pub fn table(entries: &[SkillEntry], quiet: bool, platform: Option<&str>) -> String {
    let mut out = String::new();
    if !quiet {
        let header = format!(
            "{}{}{}{}{}REQ DEF",
            pad("PLATFORM", 9),
            pad("TYPE", 9),
            pad("SCOPE", 9),
            pad("NAME", 32),
            pad("HINT", 28)
        );
        out.push_str(&header);
        out.push('\n');
        out.push_str(&"─".repeat(80.max(header.chars().count())));
        out.push('\n');
    }
    for e in entries {
        let hint = if e.hint.is_empty() { "—" } else { &e.hint };
        let hint: String = hint.chars().take(26).collect();
        out.push_str(&format!(
            "{}{}{}{}{}{:>3} {:>3} {}\n",
            pad(e.platform, 9),
            pad(e.kind, 9),
            pad(e.scope, 9),
            pad(&e.name, 32),
            pad(&hint, 28),
            e.required,
            e.deferred,
            if e.missing_required.is_empty() {
                ' '
            } else {
                '!'
            }
        ));
    }
    if !quiet {
        let commands = entries.iter().filter(|e| e.kind == "command").count();
        let missing = entries
            .iter()
            .filter(|e| !e.missing_required.is_empty())
            .count();
        let label = platform.map(|p| format!(" [{p}]")).unwrap_or_default();
        out.push('\n');
        out.push_str(&format!(
            "  {} entries{label} ({commands} command, {} skill){}\n",
            entries.len(),
            entries.len() - commands,
            if missing > 0 {
                format!(" — {missing} with missing required_reading (!)")
            } else {
                String::new()
            }
        ));
    }
    out
}

/// maestro's `pad`: a too-long cell is cut to width-1 and followed by one space.
fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n >= width {
        let mut cut: String = s.chars().take(width - 1).collect();
        cut.push(' ');
        cut
    } else {
        format!("{s}{}", " ".repeat(width - n))
    }
}
