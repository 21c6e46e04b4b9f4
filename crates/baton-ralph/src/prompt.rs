//! The prompt `next` prints: the command file without its frontmatter, each required file
//! inlined where it is named, the skill-config defaults and the trailer with the completion
//! commands (maestro v0.4.18 layout).
//!
//! Unlike maestro, each reference is inlined with its own file (maestro pairs `@` lines with
//! files by position, so a line naming two files, or a `- path` bullet, shifts every later
//! file onto the wrong label). As in maestro, only the first `<required_reading>` block is read.

use super::error::{RalphError, Result};
use super::manifest::{self, Manifest};
use super::session::Step;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a file is refused for a confined model's prompt.
const OUTSIDE: &str = "outside the project, the command and skill folders and maestro's home";

/// All required files of one prompt together may not exceed this.
pub const MAX_PROMPT_BYTES: usize = 16 * 1024 * 1024;

/// A command file with the content of every required file.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub manifest: Manifest,
    pub contents: HashMap<PathBuf, String>,
}

impl Loaded {
    /// Reads the command file and its required files; any missing or unreadable required file
    /// is E007 (all of them are listed). With `roots` (see `Context::prompt_roots`), the command
    /// file and every required file must resolve (links followed) inside one of them; one
    /// outside is refused, named with the reference as written, and never read.
    pub fn read(command: &Path, home: Option<&Path>, roots: Option<&[PathBuf]>) -> Result<Loaded> {
        let roots: Option<Vec<PathBuf>> =
            roots.map(|r| r.iter().filter_map(|p| p.canonicalize().ok()).collect());
        let outside = |p: &Path| {
            roots.as_ref().is_some_and(|roots| {
                !p.canonicalize()
                    .is_ok_and(|real| roots.iter().any(|r| real.starts_with(r)))
            })
        };
        if outside(command) && command.exists() {
            return Err(RalphError::RequiredMissing {
                command: command.to_path_buf(),
                missing: vec![format!(
                    "{} (the command file itself: {OUTSIDE})",
                    command.display()
                )],
            });
        }
        let manifest = Manifest::load(command, home).map_err(|e| RalphError::RequiredMissing {
            command: command.to_path_buf(),
            missing: vec![format!(
                "{} (the command file itself: {e})",
                command.display()
            )],
        })?;
        let mut contents = HashMap::new();
        let mut problems = Vec::new();
        let mut total = 0usize;
        for r in &manifest.required {
            if contents.contains_key(&r.path) {
                continue;
            }
            if !r.path.exists() {
                problems.push(r.path.display().to_string());
                continue;
            }
            if outside(&r.path) {
                problems.push(format!(
                    "{} ({}: {OUTSIDE}; not read)",
                    r.raw,
                    command.display()
                ));
                continue;
            }
            match manifest::read_text(&r.path) {
                Ok(text) => {
                    total += text.len();
                    contents.insert(r.path.clone(), text);
                }
                Err(e) => problems.push(format!("{} ({e})", r.path.display())),
            }
        }
        if total > MAX_PROMPT_BYTES {
            problems.push(format!(
                "required files total {total} bytes, over the {MAX_PROMPT_BYTES}-byte limit"
            ));
        }
        if !problems.is_empty() {
            return Err(RalphError::RequiredMissing {
                command: command.to_path_buf(),
                missing: problems,
            });
        }
        Ok(Loaded { manifest, contents })
    }

    pub fn required_files(&self) -> Vec<String> {
        self.manifest
            .required
            .iter()
            .map(|r| r.path.display().to_string())
            .collect()
    }

    pub fn deferred_files(&self) -> Vec<String> {
        self.manifest
            .deferred
            .iter()
            .map(|r| r.path.display().to_string())
            .collect()
    }
}

/// The body with the first required block's references replaced by their files.
pub fn inline_required(loaded: &Loaded) -> String {
    let body = &loaded.manifest.body;
    let base = loaded.manifest.path.parent().unwrap_or(Path::new("/"));
    let mut out = String::with_capacity(body.len());
    let mut at = 0;
    // The first block only, as maestro: a later one stays as the command file wrote it.
    for b in manifest::blocks(body, "required_reading")
        .into_iter()
        .take(1)
    {
        out.push_str(&body[at..b.start]);
        let mut lines: Vec<Cow<str>> = Vec::new();
        for line in body[b.inner_start..b.inner_end].split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let refs = manifest::line_refs(line);
            if refs.is_empty() {
                lines.push(Cow::Borrowed(line));
                continue;
            }
            for raw in refs {
                let path = loaded
                    .manifest
                    .required
                    .iter()
                    .find(|r| r.raw == raw)
                    .map_or_else(|| manifest::expand(&raw, base, None), |r| r.path.clone());
                lines.push(Cow::Owned(format!("<!-- inlined {raw} -->")));
                lines.push(Cow::Borrowed(
                    loaded.contents.get(&path).map_or("", String::as_str),
                ));
                lines.push(Cow::Borrowed("<!-- /inlined -->"));
            }
        }
        out.push_str("<required_reading>\n");
        out.push_str(&lines.join("\n"));
        out.push_str("\n</required_reading>");
        at = b.end;
    }
    out.push_str(&body[at..]);
    out
}

/// Which maestro's prompt layout: v0.4.18's, or v0.5's (protocol version "2": the session
/// anchor on top, `--session` and `--summary` in the completion commands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout<'a> {
    V4,
    /// With the anchor block, if the session has one (an intent).
    V5 {
        anchor: Option<&'a str>,
    },
}

/// The whole prompt, as maestro prints it (`cli` is e.g. `baton ralph`).
pub fn render(
    cli: &str,
    session_id: &str,
    total: usize,
    step: &Step,
    loaded: &Loaded,
    config_section: Option<&str>,
    layout: Layout,
) -> String {
    let idx = step.index();
    let args = step.args().trim();
    let args_part = if args.is_empty() {
        String::new()
    } else {
        format!(
            " args={}",
            serde_json::to_string(args).unwrap_or_else(|_| format!("\"{args}\""))
        )
    };
    let head_line = format!(
        "<!-- {cli}: step [{idx}/{total}] skill={}{args_part} session={session_id} -->",
        step.skill()
    );
    let (head, meta) = match layout {
        Layout::V4 => (
            String::new(),
            [
                String::new(),
                head_line,
                "<!-- On finish, run exactly one of:".into(),
                format!("       {cli} complete {idx} --status DONE [--evidence <path>]"),
                format!(
                    "       {cli} complete {idx} --status DONE_WITH_CONCERNS --concerns \"...\""
                ),
                format!("       {cli} retry {idx}"),
                format!(
                    "       {cli} complete {idx} --status BLOCKED --reason \"<external blocker>\" -->"
                ),
            ]
            .join("\n"),
        ),
        Layout::V5 { anchor } => {
            let s = format!("--session {session_id}");
            (
                anchor.map_or_else(String::new, |a| format!("{a}\n\n")),
                [
                    String::new(),
                    head_line,
                    "<!-- On finish, run exactly one of:".into(),
                    format!(
                        "       {cli} complete {idx} {s} --status DONE --summary \"...\" [--evidence <path>] [--decisions \"...\"] [--caveats \"...\"] [--deferred \"...\"]"
                    ),
                    format!(
                        "       {cli} complete {idx} {s} --status DONE_WITH_CONCERNS --summary \"...\" --concerns \"...\""
                    ),
                    format!("       {cli} retry {idx} {s}"),
                    format!(
                        "       {cli} complete {idx} {s} --status BLOCKED --reason \"<external blocker>\""
                    ),
                    "     --summary is REQUIRED for DONE/DONE_WITH_CONCERNS (verb-led, ≤100 chars, core outcome). -->".into(),
                ]
                .join("\n"),
            )
        }
    };
    let body = inline_required(loaded);
    match config_section {
        Some(section) => format!("{head}{body}\n\n{section}{meta}\n"),
        None => format!("{head}{body}{meta}\n"),
    }
}
