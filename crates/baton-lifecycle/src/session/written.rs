//! A step a coding-agent CLI ran is judged by the files it left, not by what it said: baton's
//! own loop ends a step with `session.complete` (status and evidence), which a CLI does not
//! have. The evidence is the project's files written since the step's run began (the CLI's
//! own tools wrote them); a CLI that finished having written some is DONE with them as
//! evidence (the gates read them as they read any step's); one that wrote nothing is what a
//! run without `session.complete` becomes (NEEDS_RETRY, then BLOCKED). The CLI's last words are
//! kept only as the step's summary.

use super::completion::{self, Completion, Status};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Folders never searched: version control, dependencies, build output, the sessions' own
/// files (baton writes those, not the step).
const SKIPPED: [&str; 4] = [".git", "node_modules", "target", ".workflow/.maestro"];
/// Most directory entries looked at: a huge tree is judged on what was seen.
const MAX_ENTRIES: usize = 200_000;
/// Most evidence paths kept (what `session.complete` accepts).
const MAX_EVIDENCE: usize = 64;
/// Longest summary kept from the CLI's last words.
const MAX_SUMMARY: usize = 300;
/// The result files the gates read: cited first, so a long list never crowds them out.
const GATE_FILES: [&str; 5] = [
    "verification.json",
    "review.json",
    "uat.md",
    "test-results.json",
    "report.json",
];

/// Project-relative paths of the regular files under `project` modified after `since`
/// (links not followed), outside [`SKIPPED`] and `skip`; the gates' files first, then by path.
pub fn since(project: &Path, since: SystemTime, skip: &[PathBuf]) -> Vec<String> {
    let skipped: Vec<PathBuf> = SKIPPED
        .iter()
        .map(|s| project.join(s))
        .chain(skip.iter().cloned())
        .collect();
    let mut found = Vec::new();
    let mut todo = vec![project.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                break;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !skipped.contains(&path) {
                    todo.push(path);
                }
                continue;
            }
            let newer = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > since);
            if kind.is_file()
                && newer
                && let Ok(rel) = path.strip_prefix(project)
            {
                found.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let gate_file = |p: &String| {
        let name = Path::new(p).file_name().map(|n| n.to_string_lossy());
        !name.is_some_and(|n| GATE_FILES.contains(&n.as_ref()))
    };
    found.sort_by(|a, b| (gate_file(a), a).cmp(&(gate_file(b), b)));
    found
}

/// The step's end from the files it wrote (`written`, see [`since`]): DONE citing them, or,
/// with none, NEEDS_RETRY the first time and BLOCKED once retried. `claim` (the CLI's last
/// words) becomes the summary only.
pub fn completion(written: Vec<String>, claim: Option<&str>, retried: bool) -> Completion {
    if written.is_empty() {
        let mut c = completion::without_call(retried);
        let why = "the CLI finished without writing a file";
        c.reason = Some(match c.status {
            Status::Blocked => format!(
                "{why}, twice; look at its runs (`baton runs log`) and finish the step by hand or retry it"
            ),
            _ => why.to_string(),
        });
        return c;
    }
    let total = written.len();
    let mut c = Completion::empty(Status::Done);
    c.evidence = written.into_iter().take(MAX_EVIDENCE).collect();
    c.summary = claim
        .map(|t| t.trim().chars().take(MAX_SUMMARY).collect::<String>())
        .filter(|t| !t.is_empty());
    if total > MAX_EVIDENCE {
        c.caveats = Some(format!(
            "{total} files were written; the first {MAX_EVIDENCE} are cited"
        ));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x").unwrap();
    }

    #[test]
    fn only_files_written_after_the_start_count_and_the_gate_files_come_first() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        touch(root, "old.txt");
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(root.join("old.txt"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let start = SystemTime::now() - Duration::from_secs(60);
        for f in [
            "src/a.rs",
            ".workflow/scratch/verification.json",
            ".git/index",
            ".workflow/.maestro/s/status.json",
            "store/run.json",
        ] {
            touch(root, f);
        }
        let got = since(root, start, &[root.join("store")]);
        assert_eq!(got, vec![".workflow/scratch/verification.json", "src/a.rs"]);
    }

    #[test]
    fn nothing_written_retries_then_blocks_and_something_written_is_done() {
        assert_eq!(
            completion(vec![], Some("done!"), false).status,
            Status::NeedsRetry
        );
        let blocked = completion(vec![], None, true);
        assert_eq!(blocked.status, Status::Blocked);
        assert!(blocked.reason.unwrap().contains("without writing"));
        let done = completion(vec!["a.md".into()], Some(" Wrote a. "), false);
        assert_eq!(done.status, Status::Done);
        assert_eq!(done.evidence, vec!["a.md"]);
        assert_eq!(done.summary.as_deref(), Some("Wrote a."));
        let many: Vec<String> = (0..70).map(|i| format!("f{i}")).collect();
        let capped = completion(many, None, false);
        assert_eq!(capped.evidence.len(), MAX_EVIDENCE);
        assert!(capped.caveats.is_some());
        // What it records passes the strict check of `session.complete`'s arguments.
        Completion::from_json(&capped.to_json()).unwrap();
    }
}
