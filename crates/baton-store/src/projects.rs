//! The store root and its registered projects.
//!
//! ```text
//! $BATON_HOME/packages/<name>@<version>-<sha8>/
//! $BATON_HOME/projects/<projectId>/project.json
//! $BATON_HOME/projects/<projectId>/runsIndex.json          (+ runsIndex.journal.jsonl)
//! $BATON_HOME/projects/<projectId>/runs/<runId>/run.json
//! $BATON_HOME/projects/<projectId>/runs/<runId>/state/workflow.md
//! $BATON_HOME/projects/<projectId>/runs/<runId>/state/logs/{execution,conversation}.jsonl
//! $BATON_HOME/demo-projects/<copy>/                         (baton serve's demo projects)
//! ```

use crate::durable::atomic_write;
use crate::home::{StoreError, resolve_home};
use crate::packages::PackageStore;
use crate::run_error::{RunError, unique_match};
use crate::run_meta::RunMetadata;
use crate::runs_index::StoreWarning;
use crate::time::now_rfc3339;
use baton_package::digest::sha256_hex;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

use crate::apart::DEMO_PROJECTS;

#[derive(Debug, Clone)]
pub struct Store {
    home: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRecord {
    pub project_id: String,
    pub root: PathBuf,
    pub created_at: String,
}

/// A registered project: its record and its directory in the store.
#[derive(Debug, Clone)]
pub struct Project {
    pub record: ProjectRecord,
    pub dir: PathBuf,
    /// Opened in one of its git worktrees ([`Store::project_in_work_tree`]): the runs created
    /// through this handle mount it as `@project`.
    pub work_tree: Option<PathBuf>,
}

/// `projectId` = first 16 hex digits of sha256(real path of the project root).
pub fn project_id(real_root: &Path) -> String {
    sha256_hex(real_root.as_os_str().as_encoded_bytes())[..16].to_string()
}

impl Store {
    pub fn new(home: impl Into<PathBuf>) -> Store {
        Store { home: home.into() }
    }

    /// The store at `$BATON_HOME` (or its default).
    pub fn open_default() -> Result<Store, StoreError> {
        resolve_home().map(Store::new)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn packages(&self) -> PackageStore {
        PackageStore::new(&self.home)
    }

    fn projects_dir(&self) -> PathBuf {
        self.home.join("projects")
    }

    /// Where `baton serve` keeps the demo's copies of the sample project, one directory per
    /// copy: the only projects allowed inside the store (a copy's mount is the copy alone).
    pub fn demo_projects_dir(&self) -> PathBuf {
        self.home.join(DEMO_PROJECTS)
    }

    /// Refuses a project that overlaps the store, either way ([`crate::apart`]). Every command
    /// pairing a project with the store calls this before any work.
    pub fn check_apart(&self, project: &Path) -> Result<(), RunError> {
        crate::apart::check(&self.home, project)
    }

    /// Registers `root` (idempotent) and returns its project.
    pub fn project(&self, root: &Path) -> Result<Project, RunError> {
        let real = fs::canonicalize(root).map_err(|e| RunError::ProjectRootInvalid {
            path: root.to_path_buf(),
            reason: e.to_string(),
        })?;
        if !real.is_dir() {
            return Err(RunError::ProjectRootInvalid {
                path: root.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        self.check_apart(&real)?;
        let id = project_id(&real);
        let dir = self.projects_dir().join(&id);
        let record_path = dir.join("project.json");
        if let Some(record) = read_record(&dir)? {
            return Ok(Project {
                record,
                dir,
                work_tree: None,
            });
        }
        fs::create_dir_all(dir.join("runs")).map_err(StoreError::io("create", &dir))?;
        let record = ProjectRecord {
            project_id: id,
            root: real,
            created_at: now_rfc3339(),
        };
        let json = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Damaged {
            id: record.project_id.clone(),
            reason: e.to_string(),
        })?;
        let project = Project {
            record,
            dir,
            work_tree: None,
        };
        // Before project.json: a registered project always has an index to append to.
        project.init_index()?;
        atomic_write(&record_path, &json)?;
        Ok(project)
    }

    /// The project at `root` (registered, idempotent) as seen from `work_tree`, one of its git
    /// worktrees (a story of a parallel epic): the runs created through the returned handle
    /// belong to the project (listed, found and kept with its own runs, one project in the
    /// store) and mount `work_tree` as `@project` (their `run.json` says so: `workTree`). The
    /// work tree must be a directory apart from the store, like every project.
    pub fn project_in_work_tree(&self, root: &Path, work_tree: &Path) -> Result<Project, RunError> {
        let mut project = self.project(root)?;
        let real = fs::canonicalize(work_tree).map_err(|e| RunError::ProjectRootInvalid {
            path: work_tree.to_path_buf(),
            reason: e.to_string(),
        })?;
        if !real.is_dir() {
            return Err(RunError::ProjectRootInvalid {
                path: work_tree.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        self.check_apart(&real)?;
        if real != project.record.root {
            project.work_tree = Some(real);
        }
        Ok(project)
    }

    /// Every registered project. A project whose `project.json` is damaged is left out, with a
    /// warning, so it never hides the others.
    pub fn projects(&self) -> Result<ProjectScan, RunError> {
        let dir = self.projects_dir();
        let mut scan = ProjectScan::default();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(scan),
            Err(e) => return Err(StoreError::io("list", &dir)(e).into()),
        };
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", &dir))?;
            match read_record(&entry.path()) {
                Ok(Some(record)) => scan.projects.push(Project {
                    record,
                    dir: entry.path(),
                    work_tree: None,
                }),
                Ok(None) => {}
                Err(e) => scan.warnings.push(StoreWarning {
                    code: e.code(),
                    message: e.to_string(),
                }),
            }
        }
        scan.projects
            .sort_by(|a, b| a.record.root.cmp(&b.record.root));
        Ok(scan)
    }

    /// The newest `limit` runs of every project (all with `None`), newest first. A project that
    /// cannot be read is skipped with a warning; its damage never hides another project's runs.
    pub fn runs(&self, limit: Option<usize>) -> Result<StoreListing, RunError> {
        let scan = self.projects()?;
        let mut listing = StoreListing {
            warnings: scan.warnings,
            ..StoreListing::default()
        };
        for project in scan.projects {
            match project.runs(limit) {
                Ok(found) => {
                    listing.warnings.extend(found.warnings);
                    listing.more |= found.more;
                    let rows: Vec<_> = found
                        .runs
                        .into_iter()
                        .map(|r| (project.clone(), r))
                        .collect();
                    listing.rows.extend(rows);
                }
                Err(e) => listing.warnings.push(unreadable(&project, &e)),
            }
        }
        listing
            .rows
            .sort_by(|a, b| b.1.sort_key().cmp(&a.1.sort_key()));
        if let Some(n) = limit
            && listing.rows.len() > n
        {
            listing.rows.truncate(n);
            listing.more = true;
        }
        Ok(listing)
    }

    /// Finds a run by id or unique id prefix, in every project. Projects that cannot be read
    /// are skipped (and named if nothing is found).
    pub fn find_run(&self, query: &str) -> Result<(Project, RunMetadata), RunError> {
        let scan = self.projects()?;
        let mut unsearched: Vec<String> = scan.warnings.iter().map(|w| w.message.clone()).collect();
        // A whole id names its directory: no index needs to be read.
        for project in &scan.projects {
            if let Some(run) = project.read_own_metadata(query) {
                return Ok((project.clone(), run));
            }
        }
        let mut found = Vec::new();
        for project in scan.projects {
            let runs = match project.list_runs() {
                Ok(runs) => runs,
                Err(e) => {
                    unsearched.push(unreadable(&project, &e).message);
                    continue;
                }
            };
            for run in runs {
                if run.run_id.starts_with(query) {
                    if run.run_id == query {
                        return Ok((project, run));
                    }
                    found.push((project.clone(), run));
                }
            }
        }
        unique_match(query, found, unsearched)
    }
}

/// The registered projects, and those that could not be read.
#[derive(Debug, Clone, Default)]
pub struct ProjectScan {
    pub projects: Vec<Project>,
    pub warnings: Vec<StoreWarning>,
}

/// Runs of every project, newest first.
#[derive(Debug, Clone, Default)]
pub struct StoreListing {
    pub rows: Vec<(Project, RunMetadata)>,
    /// A limit left older runs out.
    pub more: bool,
    pub warnings: Vec<StoreWarning>,
}

fn unreadable(project: &Project, e: &RunError) -> StoreWarning {
    StoreWarning {
        code: e.code(),
        message: format!(
            "the runs of {} cannot be read: {e}",
            project.root().display()
        ),
    }
}

/// `dir/project.json`; `Ok(None)` when the directory has none.
fn read_record(dir: &Path) -> Result<Option<ProjectRecord>, RunError> {
    let path = dir.join("project.json");
    match fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| RunError::ProjectRecordInvalid {
                    dir: dir.to_path_buf(),
                    reason: e.to_string(),
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", &path)(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing of the store can be a project, except a copy directly in `demo-projects/` (and
    /// not a link from there back into the store).
    #[test]
    fn only_a_demo_copy_may_be_a_project_inside_the_store() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let demo = store.demo_projects_dir();
        for dir in ["projects/x", "demo-projects/copy/sub", "packages"] {
            fs::create_dir_all(home.path().join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(home.path().join("projects"), demo.join("link")).unwrap();
        for refused in [
            home.path().to_path_buf(),
            home.path().join("projects/x"),
            home.path().join("packages"),
            demo.clone(),
            demo.join("copy/sub"),
            demo.join("link"),
        ] {
            let e = store.project(&refused).unwrap_err();
            assert_eq!(e.code(), "STORE_PROJECT_OVERLAP", "{}", refused.display());
        }
        let copy = store.project(&demo.join("copy")).unwrap();
        assert_eq!(copy.root(), fs::canonicalize(demo.join("copy")).unwrap());
    }
}
