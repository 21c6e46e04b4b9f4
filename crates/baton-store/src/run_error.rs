//! How run and project operations fail ([`RunError`]), and the lookup of one run by an id
//! prefix that fails with it.

use crate::home::StoreError;
use crate::run_meta::RunMetadata;
use std::path::{Path, PathBuf};

/// At most this many candidates are named by `RUN_ID_AMBIGUOUS`.
const AMBIGUOUS_SHOWN: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("project root {} is not usable: {reason}", path.display())]
    ProjectRootInvalid { path: PathBuf, reason: String },
    #[error("{}", overlap_message(store, project, *store_inside_project))]
    StoreOverlap {
        store: PathBuf,
        project: PathBuf,
        store_inside_project: bool,
    },
    #[error("project.json of {} is damaged: {reason}", dir.display())]
    ProjectRecordInvalid { dir: PathBuf, reason: String },
    #[error("{message}")]
    Workflow {
        code: &'static str,
        message: String,
        hint: Option<String>,
    },
    #[error("the package given is not the installed package {id}")]
    PackageMismatch { id: String },
    #[error("package {id} is not installed")]
    PackageNotFound { id: String },
    #[error(
        "installed package {id} changed since the run started (expected sha256 {expected}, found {actual})"
    )]
    PackageChanged {
        id: String,
        expected: String,
        actual: String,
    },
    #[error("cannot initialize the run state: {0}")]
    StateInit(String),
    #[error("{} is damaged: {reason}", path.display())]
    IndexInvalid { path: PathBuf, reason: String },
    #[error("no run matches '{query}'{}", unsearched_note(unsearched))]
    RunNotFound {
        query: String,
        /// Projects that could not be searched, and why.
        unsearched: Vec<String>,
    },
    #[error("'{query}' matches {} runs: {}", matches.len(), name_some(matches))]
    RunAmbiguous { query: String, matches: Vec<String> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn overlap_message(store: &Path, project: &Path, store_inside_project: bool) -> String {
    if store_inside_project {
        format!(
            "baton's store {} is inside the project {}: the project's model could rewrite its own run's state",
            store.display(),
            project.display()
        )
    } else {
        format!(
            "the project {} is inside baton's store {}: the project's model could rewrite the store",
            project.display(),
            store.display()
        )
    }
}

fn unsearched_note(unsearched: &[String]) -> String {
    if unsearched.is_empty() {
        String::new()
    } else {
        format!(" (not searched: {})", unsearched.join("; "))
    }
}

fn name_some(ids: &[String]) -> String {
    let shown = ids[..ids.len().min(AMBIGUOUS_SHOWN)].join(", ");
    match ids.len().saturating_sub(AMBIGUOUS_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

impl RunError {
    pub fn code(&self) -> &'static str {
        match self {
            RunError::ProjectRootInvalid { .. } => "PROJECT_ROOT_INVALID",
            RunError::StoreOverlap { .. } => "STORE_PROJECT_OVERLAP",
            RunError::ProjectRecordInvalid { .. } => "PROJECT_RECORD_INVALID",
            RunError::Workflow { code, .. } => code,
            RunError::PackageMismatch { .. } => "PACKAGE_MISMATCH",
            RunError::PackageNotFound { .. } => "PACKAGE_NOT_FOUND",
            RunError::PackageChanged { .. } => "RUN_PACKAGE_CHANGED",
            RunError::StateInit(_) => "STATE_INIT_FAILED",
            RunError::IndexInvalid { .. } => "RUNS_INDEX_INVALID",
            RunError::RunNotFound { .. } => "RUN_NOT_FOUND",
            RunError::RunAmbiguous { .. } => "RUN_ID_AMBIGUOUS",
            RunError::Store(_) => "STORE_IO_FAILED",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            RunError::Workflow { hint, .. } => hint.clone(),
            RunError::ProjectRootInvalid { path, .. } => Some(format!(
                "--project takes the directory the workflow works on: create it first (mkdir -p {}) or pass another one",
                path.display()
            )),
            RunError::ProjectRecordInvalid { dir, .. } => Some(format!(
                "restore it from a backup, or remove it: the next baton command given `--project <DIR>` for that project registers it again (its runs in {} are kept)",
                dir.join("runs").display()
            )),
            RunError::StoreOverlap { .. } => Some(
                "keep the store and the project apart: set BATON_HOME to a directory outside the project (the default is ~/.local/share/baton), or pass a --project that does not contain the store".into(),
            ),
            RunError::PackageChanged { .. } => Some(
                "installed packages are read-only; reinstall the original package or start a new run".into(),
            ),
            RunError::IndexInvalid { .. } => {
                Some("`baton runs reindex` rebuilds the index from the run directories".into())
            }
            RunError::RunNotFound { .. } => Some("`baton runs list` shows the runs".into()),
            RunError::RunAmbiguous { .. } => Some("type more characters of the run id".into()),
            _ => None,
        }
    }
}

/// The one run `query` names among `found`, or the error for none or several.
pub(crate) fn unique_match<T>(
    query: &str,
    mut found: Vec<(T, RunMetadata)>,
    unsearched: Vec<String>,
) -> Result<(T, RunMetadata), RunError> {
    match found.len() {
        0 => Err(RunError::RunNotFound {
            query: query.to_string(),
            unsearched,
        }),
        1 => Ok(found.remove(0)),
        _ => Err(RunError::RunAmbiguous {
            query: query.to_string(),
            matches: found.into_iter().map(|(_, r)| r.run_id).collect(),
        }),
    }
}
