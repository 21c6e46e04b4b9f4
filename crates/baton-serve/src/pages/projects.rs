//! The projects the store knows, newest first (by their newest run, else by when they were
//! registered): offered in every project field, and opened by the epic board and the sessions
//! page when none is chosen, so a page never starts empty after `baton demo epic` or
//! `baton demo session`.

use super::html::{push_esc, query};
use baton_store::{Project, Store};
use std::path::Path;

/// Projects looked at, at most, for one that has an epic or sessions.
pub const LOOKED_AT: usize = 20;

/// The registered projects, newest first.
pub fn newest_first(store: &Store) -> Vec<Project> {
    let Ok(scan) = store.projects() else {
        return Vec::new();
    };
    let mut dated: Vec<((String, String), Project)> = scan
        .projects
        .into_iter()
        .map(|p| {
            // The index's newest record only: a cheap read of the index's end. Its id breaks
            // a tie of creation times to the second (run ids are UUID v7: time-ordered to the
            // millisecond).
            let newest = p
                .runs(Some(1))
                .ok()
                .and_then(|l| l.runs.into_iter().next())
                .map(|r| (r.created_at, r.run_id))
                .unwrap_or_else(|| (p.record.created_at.clone(), String::new()));
            (newest, p)
        })
        .collect();
    dated.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.root().cmp(b.1.root())));
    dated.into_iter().map(|(_, p)| p).collect()
}

/// Whether `root` has a sprint status the epic board can read.
fn has_sprint(root: &Path) -> bool {
    baton_epic::board::status(root, None).is_ok()
}

/// The folder `baton serve` was started in, or the nearest folder above it, that has a sprint
/// status (a subfolder of a BMAD project opens that project, as git finds its repository).
fn start_project(start_dir: &Path) -> Option<String> {
    start_dir
        .ancestors()
        .find(|d| has_sprint(d))
        .map(|d| d.display().to_string())
}

/// The projects the epic board offers: the one `baton serve` was started in first, then the
/// known projects with a sprint status, newest first; projects without BMAD files are left
/// out (they have no board to open).
pub fn with_sprint(store: &Store, start_dir: Option<&Path>) -> Vec<String> {
    let mut found: Vec<String> = start_dir.and_then(start_project).into_iter().collect();
    for p in newest_first(store).iter().take(LOOKED_AT) {
        let root = p.root().display().to_string();
        if !found.contains(&root) && has_sprint(p.root()) {
            found.push(root);
        }
    }
    found
}

/// The roots of [`newest_first`], as shown in the pages.
pub fn roots(projects: &[Project]) -> Vec<String> {
    projects
        .iter()
        .map(|p| p.root().display().to_string())
        .collect()
}

/// The registered project whose root is `root` (compared as real paths), if any.
pub fn registered(store: &Store, root: &Path) -> Option<Project> {
    let real = std::fs::canonicalize(root).ok()?;
    store
        .projects()
        .ok()?
        .projects
        .into_iter()
        .find(|p| p.root() == real || std::fs::canonicalize(p.root()).is_ok_and(|r| r == real))
}

/// Links to the other known projects of a page (`/epic` or `/sessions`), newest first, the
/// open one marked.
pub fn chooser(out: &mut String, page: &str, open: &str, roots: &[String]) {
    if roots.is_empty() {
        return;
    }
    out.push_str(
        "<nav class=\"projects\" id=\"project-list\" aria-label=\"Known projects\"><span class=\"muted\">Projects, newest first:</span><ul>",
    );
    for root in roots.iter().take(LOOKED_AT) {
        out.push_str("<li><a href=\"");
        push_esc(out, &format!("{page}{}", query(&[("project", root)])));
        out.push_str("\" class=\"path\" data-project=\"");
        push_esc(out, root);
        out.push('"');
        if root == open {
            out.push_str(" aria-current=\"true\"");
        }
        out.push('>');
        push_esc(out, root);
        out.push_str("</a></li>");
    }
    out.push_str("</ul></nav>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chooser_links_every_project_and_marks_the_open_one() {
        let mut out = String::new();
        chooser(&mut out, "/epic", "/b", &["/a <x>".into(), "/b".into()]);
        assert!(
            out.contains("href=\"/epic?project=%2Fa%20%3Cx%3E\""),
            "{out}"
        );
        assert!(out.contains("data-project=\"/b\" aria-current=\"true\""));
        assert!(out.contains(">/a &lt;x&gt;<"));
        let mut none = String::new();
        chooser(&mut none, "/epic", "", &[]);
        assert!(none.is_empty());
    }
}
