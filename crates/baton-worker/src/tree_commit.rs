//! A unit's checkpoint commits, made in this process: the worktree walked as `git add -A` sees
//! it (`.gitignore` files and `info/exclude` followed, tracked files kept even where ignored,
//! nested repositories never entered, only regular files and links), each file hashed only when
//! its size or times changed, the new blobs, trees and commit written as loose objects. No git
//! process runs, so nothing in the tree (hooks, `core.fsmonitor`, filters, a nested
//! repository's configuration) can run either. The commit is kept in memory (the worktree's
//! HEAD and index stay at the checkout); the next commit's parent is the last one.

use crate::index_file::{self, IndexEntry, Stat};
use crate::objects::{self, Objects, Oid, TREE_MODE};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// git's mode for a link, and for a nested repository's commit (a submodule).
pub(crate) const LINK_MODE: u32 = 0o120000;
pub(crate) const GITLINK_MODE: u32 = 0o160000;
/// Files at most this large are kept in memory once read, so a checkpoint can carry them.
pub(crate) const KEEP_BYTES: u64 = 256 * 1024;
/// A file changed this recently may change again within the file system's clock tick without
/// its times moving: it is hashed again at the next commit.
const RACY_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub mode: u32,
    pub oid: Oid,
}

pub(crate) type Entries = BTreeMap<String, Entry>;

/// The files that differ between two commits: each path's new mode and bytes, or `None` where
/// the file is gone.
pub(crate) type Changes = BTreeMap<String, Option<(u32, Vec<u8>)>>;

pub(crate) struct TreeCommitter {
    root: PathBuf,
    objects: Objects,
    head: Oid,
    entries: Arc<Entries>,
    /// The stat data of files whose blob is known, not changed too recently.
    stat: HashMap<String, (Stat, u32, Oid)>,
    /// The bytes of blobs read since the oldest commit still kept.
    blobs: HashMap<Oid, Vec<u8>>,
    known_trees: HashSet<Oid>,
    /// The entries of the commits made (and the first), oldest first.
    commits: Vec<(Oid, Arc<Entries>)>,
}

fn io_other(message: String) -> std::io::Error {
    std::io::Error::other(message)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl TreeCommitter {
    /// Starts from `head`, the commit the worktree at `root` was checked out at, whose entries
    /// are `entries`; the stat data of those read from git's index at `index_mtime_ns` is
    /// trusted where older than the index (git's rule for "racily clean" entries).
    pub fn new(
        root: &Path,
        objects_dir: PathBuf,
        head: Oid,
        entries: Vec<IndexEntry>,
        index_mtime_ns: Option<u64>,
    ) -> TreeCommitter {
        let mut stat = HashMap::new();
        let mut map = Entries::new();
        for e in entries {
            if index_mtime_ns.is_some_and(|t| e.stat.mtime_ns() < t) && e.mode != GITLINK_MODE {
                stat.insert(e.path.clone(), (e.stat, e.mode, e.oid));
            }
            map.insert(
                e.path,
                Entry {
                    mode: e.mode,
                    oid: e.oid,
                },
            );
        }
        let mut committer = TreeCommitter {
            root: root.to_path_buf(),
            objects: Objects::new(objects_dir),
            head,
            entries: Arc::new(map),
            stat,
            blobs: HashMap::new(),
            known_trees: HashSet::new(),
            commits: Vec::new(),
        };
        // The checked-out commit's trees are in the repository already.
        let entries = committer.entries.clone();
        committer.tree_of(&entries, false).ok();
        committer.commits.push((head, entries));
        committer
    }

    /// Commits the worktree as it is now with `message`, unless it holds what the last commit
    /// holds; returns the head and whether it is new.
    pub fn commit(&mut self, message: &str, seconds: u64) -> std::io::Result<(Oid, bool)> {
        let entries = self.scan()?;
        if entries == *self.entries {
            return Ok((self.head, false));
        }
        let tree = self.tree_of(&entries, true)?;
        let body = objects::commit_body(&tree, &self.head, seconds, message);
        let commit = self.objects.write("commit", &body)?;
        self.head = commit;
        self.entries = Arc::new(entries);
        self.commits.push((commit, self.entries.clone()));
        Ok((commit, true))
    }

    /// The files that differ between `base` (a commit made here, or the first) and the head,
    /// with their bytes; `None` when `base` is not known or a changed file's bytes were not
    /// kept (too large, or a nested repository's commit).
    pub fn changes_since(&self, base: &Oid) -> Option<Changes> {
        let (_, old) = self.commits.iter().find(|(c, _)| c == base)?;
        let mut changes = Changes::new();
        for (path, e) in self.entries.iter() {
            if old.get(path) == Some(e) {
                continue;
            }
            if e.mode == GITLINK_MODE {
                return None;
            }
            let bytes = self.blobs.get(&e.oid)?;
            changes.insert(path.clone(), Some((e.mode, bytes.clone())));
        }
        for path in old.keys() {
            if !self.entries.contains_key(path) {
                changes.insert(path.clone(), None);
            }
        }
        Some(changes)
    }

    /// Forgets the commits before `base` and the bytes no later change can need.
    pub fn forget_before(&mut self, base: &Oid) {
        if let Some(i) = self.commits.iter().position(|(c, _)| c == base) {
            self.commits.drain(..i);
        }
        let mut needed: HashSet<Oid> = HashSet::new();
        if let Some((_, oldest)) = self.commits.first() {
            for (path, e) in self.entries.iter() {
                if oldest.get(path) != Some(e) {
                    needed.insert(e.oid);
                }
            }
        }
        self.blobs.retain(|oid, _| needed.contains(oid));
    }

    /// The worktree's entries as `git add -A` would stage them.
    fn scan(&mut self) -> std::io::Result<Entries> {
        let racy_after = now_ns().saturating_sub(RACY_NS);
        let mut out = Entries::new();
        let root = self.root.clone();
        let walker = ignore::WalkBuilder::new(&root)
            .hidden(false)
            .parents(false)
            .ignore(false)
            .git_global(false)
            .git_ignore(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| {
                e.file_name() != ".git"
                    && !(e.depth() > 0
                        && e.file_type().is_some_and(|t| t.is_dir())
                        && e.path().join(".git").symlink_metadata().is_ok())
            })
            .build();
        for item in walker {
            let Ok(item) = item else { continue };
            if item.depth() == 0 || item.file_type().is_none_or(|t| t.is_dir()) {
                continue;
            }
            let Some(rel) = relative(&root, item.path()) else {
                continue;
            };
            self.add(&rel, racy_after, &mut out)?;
        }
        // Tracked files git keeps though ignored or inside a nested repository.
        let tracked: Vec<(String, Entry)> = self
            .entries
            .iter()
            .filter(|(p, _)| !out.contains_key(*p))
            .map(|(p, e)| (p.clone(), *e))
            .collect();
        for (rel, entry) in tracked {
            if !parents_are_folders(&root, &rel) {
                continue;
            }
            if entry.mode == GITLINK_MODE {
                if root.join(&rel).is_dir() {
                    out.insert(rel, entry);
                }
                continue;
            }
            self.add(&rel, racy_after, &mut out)?;
        }
        Ok(out)
    }

    /// Adds the file or link at `rel` (if it is one) to `out`, hashing it if it changed.
    fn add(&mut self, rel: &str, racy_after: u64, out: &mut Entries) -> std::io::Result<()> {
        let path = self.root.join(rel);
        let Ok(meta) = path.symlink_metadata() else {
            return Ok(());
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)?;
            let bytes = target.as_os_str().as_bytes().to_vec();
            let oid = self.objects.write("blob", &bytes)?;
            self.blobs.insert(oid, bytes);
            out.insert(
                rel.to_string(),
                Entry {
                    mode: LINK_MODE,
                    oid,
                },
            );
            return Ok(());
        }
        if !meta.is_file() {
            return Ok(());
        }
        let mode = if meta.mode() & 0o100 != 0 {
            0o100755
        } else {
            0o100644
        };
        let now = Stat::of(&meta);
        if let Some((was, m, oid)) = self.stat.get(rel)
            && *m == mode
            && index_file::same_file(was, &now)
        {
            out.insert(rel.to_string(), Entry { mode, oid: *oid });
            return Ok(());
        }
        // Never blocks on a FIFO swapped in since, never follows a link swapped in since.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path)?;
        let opened = file.metadata()?;
        if !opened.is_file() {
            return Ok(());
        }
        let (oid, kept) = self
            .objects
            .write_blob(&file, opened.len(), KEEP_BYTES)
            .map_err(|e| io_other(format!("{rel}: {e}")))?;
        if let Some(bytes) = kept {
            self.blobs.insert(oid, bytes);
        }
        let opened_stat = Stat::of(&opened);
        if opened_stat.mtime_ns() < racy_after {
            self.stat.insert(rel.to_string(), (opened_stat, mode, oid));
        } else {
            self.stat.remove(rel);
        }
        out.insert(rel.to_string(), Entry { mode, oid });
        Ok(())
    }

    /// The root tree of `entries`: written when `write` (unless known), else only hashed and
    /// taken as known.
    fn tree_of(&mut self, entries: &Entries, write: bool) -> std::io::Result<Oid> {
        let mut root = Folder::default();
        for (path, e) in entries {
            root.insert(path, *e);
        }
        self.emit(&root, write)
    }

    fn emit(&mut self, folder: &Folder, write: bool) -> std::io::Result<Oid> {
        let mut items: Vec<(&str, u32, Oid)> = Vec::new();
        for (name, e) in &folder.files {
            items.push((name.as_str(), e.mode, e.oid));
        }
        for (name, sub) in &folder.folders {
            let oid = self.emit(sub, write)?;
            items.push((name.as_str(), TREE_MODE, oid));
        }
        let body = objects::tree_body(&mut items);
        let oid = objects::hash("tree", &body);
        if !self.known_trees.contains(&oid) {
            if write {
                self.objects.write("tree", &body)?;
            }
            self.known_trees.insert(oid);
        }
        Ok(oid)
    }
}

#[derive(Default)]
struct Folder {
    files: BTreeMap<String, Entry>,
    folders: BTreeMap<String, Folder>,
}

impl Folder {
    fn insert(&mut self, path: &str, entry: Entry) {
        match path.split_once('/') {
            None => {
                self.files.insert(path.to_string(), entry);
            }
            Some((dir, rest)) => self
                .folders
                .entry(dir.to_string())
                .or_default()
                .insert(rest, entry),
        }
    }
}

fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

/// Whether every folder above `rel` (beneath `root`) is a folder, not a link to elsewhere.
fn parents_are_folders(root: &Path, rel: &str) -> bool {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        if !at.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            return false;
        }
    }
    true
}

/// Writes `changes` into the worktree at `root` (a takeover putting back what a checkpoint
/// carried): files removed, then written with their mode, links made. A path that would leave
/// the tree or enter a repository's folder is refused; a link or file standing where a folder
/// must be is removed first, so nothing is written through a link.
pub(crate) fn apply(root: &Path, changes: &Changes) -> std::io::Result<()> {
    for path in changes.keys() {
        if path
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == ".." || p == ".git")
        {
            return Err(io_other(format!("a checkpointed path is unsafe: {path}")));
        }
    }
    for (path, change) in changes {
        if change.is_none() && parents_are_folders(root, path) {
            let target = root.join(path);
            if target.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                std::fs::remove_file(&target)?;
            }
        }
    }
    for (path, change) in changes {
        let Some((mode, bytes)) = change else {
            continue;
        };
        let parts: Vec<&str> = path.split('/').collect();
        let mut at = root.to_path_buf();
        for part in &parts[..parts.len() - 1] {
            at.push(part);
            match at.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    std::fs::remove_file(&at)?;
                    std::fs::create_dir(&at)?;
                }
                Err(_) => std::fs::create_dir(&at)?,
            }
        }
        let target = root.join(path);
        match target.symlink_metadata() {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&target)?,
            Ok(_) => std::fs::remove_file(&target)?,
            Err(_) => {}
        }
        if *mode == LINK_MODE {
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(bytes), &target)?;
        } else {
            std::fs::write(&target, bytes)?;
            let perm = if *mode == 0o100755 { 0o755 } else { 0o644 };
            std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(perm))?;
        }
    }
    Ok(())
}

/// A committer for the unit's worktree at `tree`, freshly checked out: its commit from the
/// worktree's `HEAD`, its entries from git's index (or, for an index not read here, from
/// `git ls-tree` run as all git on the tree runs).
pub(crate) fn open(home: &Path, tree: &Path) -> Result<TreeCommitter, crate::WorkerError> {
    let io = |e: String| crate::WorkerError::other("WORKER_IO", e);
    let dirs = baton_git::RepoDirs::resolve(tree).map_err(|e| io(e.message))?;
    let head_text = std::fs::read_to_string(dirs.git_dir.join("HEAD")).unwrap_or_default();
    let head = match objects::from_hex(head_text.trim()) {
        Some(h) => h,
        None => {
            let text = crate::git::tree_git(home, tree, &["rev-parse", "HEAD"])?;
            objects::from_hex(text.trim()).ok_or_else(|| io(format!("HEAD is {text}")))?
        }
    };
    let index = dirs.git_dir.join("index");
    let parsed = std::fs::read(&index)
        .ok()
        .and_then(|bytes| index_file::parse(&bytes));
    let (entries, index_mtime) = match parsed {
        Some(entries) => {
            let mtime = index
                .metadata()
                .ok()
                .map(|m| m.mtime() as u64 * 1_000_000_000 + m.mtime_nsec() as u64);
            (entries, mtime)
        }
        None => (listed_entries(home, tree)?, None),
    };
    Ok(TreeCommitter::new(
        tree,
        dirs.common_dir.join("objects"),
        head,
        entries,
        index_mtime,
    ))
}

/// The entries of the worktree's `HEAD` as `git ls-tree -r -z` lists them.
fn listed_entries(home: &Path, tree: &Path) -> Result<Vec<IndexEntry>, crate::WorkerError> {
    let out = crate::git::tree_git(home, tree, &["ls-tree", "-r", "-z", "--full-tree", "HEAD"])?;
    let mut entries = Vec::new();
    for line in out.split('\0').filter(|l| !l.is_empty()) {
        let parsed = line.split_once('\t').and_then(|(meta, path)| {
            let mut it = meta.split(' ');
            let mode = u32::from_str_radix(it.next()?, 8).ok()?;
            let oid = objects::from_hex(it.nth(1)?)?;
            Some((mode, oid, path))
        });
        let Some((mode, oid, path)) = parsed else {
            return Err(crate::WorkerError::other(
                "WORKER_GIT_FAILED",
                format!("git ls-tree printed {line:?}"),
            ));
        };
        entries.push(IndexEntry {
            path: path.to_string(),
            mode,
            oid,
            stat: Stat::unknown(),
        });
    }
    Ok(entries)
}
