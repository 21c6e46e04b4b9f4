//! Reading and guarded writing of one run's `workflow.md`, under the run's lock.

use crate::durable::atomic_write;
use crate::guard::{self, GuardOptions};
use crate::home::StoreError;
use crate::state::{StateDoc, StateError, UpdateSummary};
use baton_package::digest::sha256_hex;
use baton_package::graph::Graph;
use serde_json::Value;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The write was refused by the guard; the file is unchanged.
    #[error(transparent)]
    Refused(#[from] StateError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone)]
pub struct StateRead {
    pub text: String,
    pub doc: StateDoc,
    pub sha256: String,
}

#[derive(Debug, Clone)]
pub struct StateWrite {
    pub before_sha256: String,
    pub after_sha256: String,
    pub doc: StateDoc,
    /// For patches: what the update changed.
    pub summary: Option<UpdateSummary>,
    pub bytes_written: usize,
}

#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    lock_path: PathBuf,
}

/// Holds the run lock until dropped.
struct Locked(File);

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl StateFile {
    pub fn new(path: PathBuf, lock_path: PathBuf) -> StateFile {
        StateFile { path, lock_path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> Result<Locked, StoreError> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(StoreError::io("open", &self.lock_path))?;
        file.lock()
            .map_err(StoreError::io("lock", &self.lock_path))?;
        Ok(Locked(file))
    }

    fn read_unlocked(&self) -> Result<StateRead, StateFileError> {
        let bytes = fs::read(&self.path).map_err(StoreError::io("read", &self.path))?;
        let sha256 = sha256_hex(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| {
            StateError::new(
                crate::state::StateCode::InvalidFrontmatter,
                "the state file is not UTF-8",
            )
        })?;
        let doc = StateDoc::parse(&text)?;
        Ok(StateRead { text, doc, sha256 })
    }

    pub fn read(&self) -> Result<StateRead, StateFileError> {
        let _lock = self.lock()?;
        self.read_unlocked()
    }

    /// Applies an `updateFrontmatter` update through the guard.
    pub fn patch(
        &self,
        graph: &Graph,
        update: &Value,
        if_match: Option<&str>,
        options: GuardOptions,
    ) -> Result<StateWrite, StateFileError> {
        let _lock = self.lock()?;
        let old = self.read_unlocked()?;
        let mut new = old.doc.clone();
        let summary = new.apply_update(update)?;
        let text = new.render()?;
        self.commit(graph, &old, new, text, if_match, options, Some(summary))
    }

    /// Replaces the whole file (the `fs.write` path) through the guard.
    pub fn replace(
        &self,
        graph: &Graph,
        text: &str,
        if_match: Option<&str>,
        options: GuardOptions,
    ) -> Result<StateWrite, StateFileError> {
        let _lock = self.lock()?;
        let old = self.read_unlocked()?;
        let new = StateDoc::parse(text)?;
        self.commit(graph, &old, new, text.to_string(), if_match, options, None)
    }

    /// Checks `new` (whose file text is `text`) against the old state, then writes it.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        graph: &Graph,
        old: &StateRead,
        new: StateDoc,
        text: String,
        if_match: Option<&str>,
        options: GuardOptions,
        summary: Option<UpdateSummary>,
    ) -> Result<StateWrite, StateFileError> {
        guard::check(&old.doc, &old.sha256, &new, graph, if_match, options)?;
        atomic_write(&self.path, text.as_bytes())?;
        Ok(StateWrite {
            before_sha256: old.sha256.clone(),
            after_sha256: sha256_hex(text.as_bytes()),
            doc: new,
            summary,
            bytes_written: text.len(),
        })
    }
}
