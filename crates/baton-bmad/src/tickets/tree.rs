//! Reading the tree (bounded, located) and writing one ticket's status back.

use super::locate::{self, OutputFolder};
use super::manifest::{self, Manifest};
use super::ticket_file;
use super::{Epic, Initiative, Ticket, Tree};
use crate::error::{BmadError, Result, refused};
use baton_autopilot::untrusted::{self, UntrustedError, limit};
use cap_std::fs::Dir;
use std::path::Path;
use std::sync::Arc;

/// Most initiatives, epics per initiative and files per epic folder read.
const MAX_FOLDERS: usize = 1_000;
const MAX_FILES: usize = 5_000;

fn open(root: &Dir, rel: &str) -> Result<Option<Dir>> {
    match untrusted::open_dir_in(root, Path::new(rel)) {
        Ok(d) => Ok(d),
        Err(UntrustedError::NotRegular(_)) => Ok(None),
        Err(e) => Err(refused(rel, &e)),
    }
}

fn read_text(dir: &Dir, name: &str, shown: &str, limit: u64) -> Result<Option<String>> {
    let bytes = untrusted::read_in(dir, Path::new(name), limit).map_err(|e| refused(shown, &e))?;
    bytes
        .map(|b| {
            String::from_utf8(b).map_err(|_| {
                BmadError::usage("TICKET_FILE_INVALID", format!("{shown}: is not UTF-8 text"))
            })
        })
        .transpose()
}

fn read_manifest(dir: &Dir, shown: &str) -> Result<Option<Manifest>> {
    match read_text(dir, manifest::FILE_NAME, shown, limit::CONFIG)? {
        Some(text) => manifest::parse(shown, &text).map(Some),
        None => Ok(None),
    }
}

fn file_error(shown: &str, field: &str, problem: &str) -> BmadError {
    let code = if field == "status" && problem.contains("not a status BMAD defines") {
        "TICKET_STATUS_UNKNOWN"
    } else {
        "TICKET_FILE_INVALID"
    };
    BmadError::invalid_file(code, shown, Some(field), problem).hint(
        "fix the ticket file's frontmatter (an integer `id`; `status` one of draft, ready-for-dev, in-progress, in-review, built, done, blocked, dropped), then run the command again",
    )
}

impl Tree {
    /// The project's ticket tree; `None` when the output folder holds no `initiative-*`
    /// folder. Every `tickets.toml` and ticket file is read (bounded) and checked: the first
    /// problem is returned, located.
    pub fn load(project: &Path) -> Result<Option<Tree>> {
        let root = untrusted::open_root(project).map_err(|e| BmadError::io("open", project)(e))?;
        let OutputFolder { rel, rule } = locate::output_folder(&root, project)?;
        let Some(out) = open(&root, &rel)? else {
            return Ok(None);
        };
        let names = locate::folders(&out, "initiative-", MAX_FOLDERS);
        if names.is_empty() {
            return Ok(None);
        }
        let mut initiatives = Vec::new();
        for name in names {
            let folder = join(&rel, &name);
            let Some(dir) = open(&out, &name)? else {
                continue;
            };
            initiatives.push(read_initiative(&dir, name, folder)?);
        }
        let tree = Tree {
            output_folder: rel,
            output_rule: rule,
            initiatives,
        };
        tree.check_after()?;
        Ok(Some(tree))
    }

    /// The initiative and epic of a ticket key.
    pub fn find(&self, key: &str) -> Option<(&Initiative, &Epic, &Ticket)> {
        self.initiatives.iter().find_map(|i| {
            i.epics
                .iter()
                .find_map(|e| e.tickets.iter().find(|t| t.key == key).map(|t| (i, e, t)))
        })
    }

    /// The project-relative path of a ticket's file (`None`: no such ticket, or not pulled).
    pub fn file_of(&self, key: &str) -> Option<String> {
        let (_, epic, t) = self.find(key)?;
        t.file.as_deref().map(|f| epic.shown(f))
    }

    /// A ticket file's text, read again (bounded).
    pub fn text_of(&self, key: &str) -> Result<Option<String>> {
        let Some((_, epic, t)) = self.find(key) else {
            return Ok(None);
        };
        let Some(file) = &t.file else {
            return Ok(None);
        };
        read_text(&epic.dir, file, &epic.shown(file), limit::PROMPT_FILE)
    }

    /// Sets a ticket's frontmatter `status` in place (every other byte kept), durably: a
    /// temporary file, fsync, rename, fsync of the folder. The file is read again first.
    pub fn set_status(&self, key: &str, status: &str) -> Result<()> {
        if !ticket_file::STATUSES.contains(&status) {
            return Err(BmadError::failure(
                "TICKET_STATUS_UNKNOWN",
                format!("{status:?} is not a status BMAD defines for a ticket"),
            ));
        }
        let (_, epic, t) = self.find(key).ok_or_else(|| {
            BmadError::usage("TICKET_NOT_FOUND", format!("no ticket {key} in the tree"))
        })?;
        let file = t.file.as_deref().ok_or_else(|| {
            BmadError::usage(
                "TICKET_NOT_PULLED",
                format!("ticket {key} has no file yet ({})", epic.manifest_path()),
            )
        })?;
        let shown = epic.shown(file);
        let text = read_text(&epic.dir, file, &shown, limit::PROMPT_FILE)?.ok_or_else(|| {
            BmadError::failure("EPIC_IO_FAILED", format!("{shown}: the file is gone"))
        })?;
        let meta = ticket_file::meta(&text).map_err(|(f, p)| file_error(&shown, f, &p))?;
        if meta.id != Some(t.id) {
            return Err(BmadError::failure(
                "TICKET_FILE_INVALID",
                format!("{shown}: field id: no longer {} (the file changed)", t.id),
            ));
        }
        if meta.status.as_deref() == Some(status) {
            return Ok(());
        }
        untrusted::write_in(
            &epic.dir,
            file,
            ticket_file::with_status(&text, status).as_bytes(),
        )
        .map_err(|e| refused(&shown, &e))
    }
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}/{name}")
    }
}

fn read_initiative(dir: &Dir, name: String, folder: String) -> Result<Initiative> {
    let shown = join(&folder, manifest::FILE_NAME);
    let planned = read_manifest(dir, &shown)?
        .map(|m| m.epics)
        .unwrap_or_default();
    let mut names = locate::folders(dir, "epic-", MAX_FOLDERS);
    // The initiative's build order first, then the epics it does not list, by name.
    let position = |n: &String| {
        planned
            .iter()
            .position(|p| p.folder.as_deref().is_some_and(|f| names_epic(f, n)))
            .unwrap_or(usize::MAX)
    };
    names.sort_by_key(|n| (position(n), n.clone()));
    let mut epics = Vec::new();
    for epic_name in names {
        let Some(edir) = open(dir, &epic_name)? else {
            continue;
        };
        let table = planned.iter().find(|p| {
            p.folder
                .as_deref()
                .is_some_and(|f| names_epic(f, &epic_name))
        });
        epics.push(read_epic(edir, &folder, epic_name, table)?);
    }
    Ok(Initiative {
        name,
        folder,
        epics,
    })
}

/// Whether an `[[epic]]` table's `slug`/`folder` names the folder `epic-<slug>`.
fn names_epic(given: &str, folder: &str) -> bool {
    let given = given.trim().trim_end_matches('/');
    given == folder || format!("epic-{given}") == folder
}

fn read_epic(
    dir: Dir,
    initiative: &str,
    name: String,
    table: Option<&manifest::Table>,
) -> Result<Epic> {
    let folder = join(initiative, &name);
    let shown_manifest = join(&folder, manifest::FILE_NAME);
    let entries = read_manifest(&dir, &shown_manifest)?
        .map(|m| m.entries)
        .unwrap_or_default();
    let own_file = format!("{name}.md");
    // The epic file's frontmatter `id` names the epic when the initiative does not.
    let mut id = table.map(|t| t.id);
    let mut files: Vec<(String, u64, ticket_file::Meta)> = Vec::new();
    for file in locate::markdown_files(&dir, MAX_FILES) {
        let shown = join(&folder, &file);
        let Some(text) = read_text(&dir, &file, &shown, limit::PROMPT_FILE)? else {
            continue;
        };
        let meta = ticket_file::meta(&text).map_err(|(f, p)| file_error(&shown, f, &p))?;
        if file == own_file {
            id = id.or(meta.id);
            continue;
        }
        if let Some(tid) = meta.id {
            files.push((file, tid, meta));
        }
    }
    let mut tickets = Vec::with_capacity(entries.len());
    for entry in &entries {
        let mine: Vec<&(String, u64, ticket_file::Meta)> =
            files.iter().filter(|(_, i, _)| *i == entry.id).collect();
        let chosen = match mine.as_slice() {
            [] => None,
            [one] => Some(*one),
            // `<type>-<slug>.md` beside its `<type>-<slug>-plan.md`: the ticket is the first.
            [a, b] if is_plan_of(&b.0, &a.0) => Some(*a),
            [a, b] if is_plan_of(&a.0, &b.0) => Some(*b),
            many => {
                let shown: Vec<String> = many.iter().map(|(f, _, _)| join(&folder, f)).collect();
                return Err(BmadError::usage(
                    "TICKET_FILE_AMBIGUOUS",
                    format!(
                        "{shown_manifest} (line {}): entry {} has {} files: {}; baton does not guess which one is the ticket",
                        entry.line,
                        entry.id,
                        many.len(),
                        shown.join(", ")
                    ),
                )
                .hint("keep one ticket file with this frontmatter id, then run the command again"));
            }
        };
        tickets.push(Ticket {
            id: entry.id,
            key: format!("{name}.{}", entry.id),
            title: entry.title.clone(),
            after: entry.after.clone(),
            line: entry.line,
            file: chosen.map(|(f, _, _)| f.clone()),
            status: chosen.and_then(|(_, _, m)| m.status.clone()),
            blocked_at: chosen.and_then(|(_, _, m)| m.blocked_at.clone()),
            blocked_reason: chosen.and_then(|(_, _, m)| m.blocked_reason.clone()),
        });
    }
    Ok(Epic {
        name,
        folder,
        id,
        title: table.and_then(|t| t.title.clone()),
        after: table.map(|t| t.after.clone()).unwrap_or_default(),
        tickets,
        dir: Arc::new(dir),
    })
}

fn is_plan_of(plan: &str, ticket: &str) -> bool {
    ticket
        .strip_suffix(".md")
        .is_some_and(|stem| plan == format!("{stem}-plan.md"))
}
