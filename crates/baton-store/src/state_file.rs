//! Reading and guarded writing of one run's `workflow.md`, under the run's lock.

use crate::durable::{Group, atomic_write};
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
    /// Writes made durable by this group's flush instead of each on its own.
    group: Option<Group>,
}

/// Where a grouped write keeps the last durable state until the group's flush: in the run's
/// folder, beside the lock, out of the model's `@state` mount.
const DURABLE_COPY: &str = "workflow.md.durable";

/// Holds the run lock until dropped.
struct Locked(File);

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl StateFile {
    pub fn new(path: PathBuf, lock_path: PathBuf) -> StateFile {
        StateFile {
            path,
            lock_path,
            group: None,
        }
    }

    /// Writes renamed into place without an fsync, made durable by `group`'s next flush (with
    /// the rest of the model turn); until then the last durable state is kept beside the run's
    /// lock, and read instead should a power cut leave the file unreadable.
    pub fn grouped(mut self, group: Group) -> StateFile {
        self.group = Some(group);
        self
    }

    fn durable_copy(&self) -> PathBuf {
        self.lock_path.with_file_name(DURABLE_COPY)
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
        match Self::parse(bytes) {
            Ok(read) => Ok(read),
            // A power cut between a grouped write and its flush: the copy is the last
            // durable state.
            Err(e) => match fs::read(self.durable_copy()) {
                Ok(copy) => Self::parse(copy).map_err(|_| e),
                Err(_) => Err(e),
            },
        }
    }

    fn parse(bytes: Vec<u8>) -> Result<StateRead, StateFileError> {
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
        match &self.group {
            Some(group) => {
                group.replace_keeping(&self.path, &self.durable_copy(), text.as_bytes())?
            }
            None => atomic_write(&self.path, text.as_bytes())?,
        }
        Ok(StateWrite {
            before_sha256: old.sha256.clone(),
            after_sha256: sha256_hex(text.as_bytes()),
            doc: new,
            summary,
            bytes_written: text.len(),
        })
    }
}
