//! The store root and its registered projects.
//!
//! ```text
//! $BATON_HOME/packages/<name>@<version>-<sha8>/
//! $BATON_HOME/projects/<projectId>/project.json
//! $BATON_HOME/projects/<projectId>/runsIndex.json
//! $BATON_HOME/projects/<projectId>/runs/<runId>/state/workflow.md
//! $BATON_HOME/projects/<projectId>/runs/<runId>/state/logs/{execution,conversation}.jsonl
//! ```

use crate::durable::atomic_write;
use crate::home::{StoreError, resolve_home};
use crate::packages::PackageStore;
use crate::runs::{RunError, RunMetadata};
use crate::time::now_rfc3339;
use baton_package::digest::sha256_hex;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

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
        if real.starts_with(&self.home)
            || fs::canonicalize(&self.home).is_ok_and(|h| real.starts_with(h))
        {
            return Err(RunError::ProjectRootInvalid {
                path: root.to_path_buf(),
                reason: "the project cannot be inside baton's own store".into(),
            });
        }
        let id = project_id(&real);
        let dir = self.projects_dir().join(&id);
        let record_path = dir.join("project.json");
        if let Some(record) = read_record(&record_path)? {
            return Ok(Project { record, dir });
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
        atomic_write(&record_path, &json)?;
        Ok(Project { record, dir })
    }

    /// Every registered project.
    pub fn projects(&self) -> Result<Vec<Project>, RunError> {
        let dir = self.projects_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("list", &dir)(e).into()),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            if let Some(record) = read_record(&entry.path().join("project.json"))? {
                out.push(Project {
                    record,
                    dir: entry.path(),
                });
            }
        }
        out.sort_by(|a, b| a.record.root.cmp(&b.record.root));
        Ok(out)
    }

    /// Finds a run by id or unique id prefix, in every project.
    pub fn find_run(&self, query: &str) -> Result<(Project, RunMetadata), RunError> {
        let mut found = Vec::new();
        for project in self.projects()? {
            for run in project.list_runs()? {
                if run.run_id.starts_with(query) {
                    if run.run_id == query {
                        return Ok((project, run));
                    }
                    found.push((project.clone(), run));
                }
            }
        }
        crate::runs::unique_match(query, found)
    }
}

fn read_record(path: &Path) -> Result<Option<ProjectRecord>, RunError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            RunError::Store(StoreError::Damaged {
                id: path.display().to_string(),
                reason: e.to_string(),
            })
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", path)(e).into()),
    }
}
