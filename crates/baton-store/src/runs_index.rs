//! A project's runs index: `runsIndex.json` plus a journal of the changes made since it was
//! last written, `runsIndex.journal.jsonl`.
//!
//! Why this shape: the index used to be rewritten and fsynced whole on every change, which at
//! 50,000 runs (18 MB) costs about 0.2 s and 18 MB per change. A change is now one appended line
//! (one `O_APPEND` write and one fsync); the journal is folded back into `runsIndex.json` when it
//! passes 1 MiB, so a reader never parses more than 1 MiB of journal. An embedded SQLite index
//! was the alternative; the journal meets the targets (run creation under 20 ms, `runs list`
//! under 50 ms at 50,000 runs; docs/BENCHMARKS.md) with no dependency, and the files stay plain.
//!
//! - `runsIndex.json` stays what seed 001 defines: a JSON array of `RunMetadata`. It is written
//!   one record per line, oldest first, so the newest runs can be read from its end without
//!   parsing the rest. It may lag the journal by up to 1 MiB of changes.
//! - The journal holds whole records; the last one for a run wins. A torn last line (a crash
//!   during the append) is skipped by readers and cut off by the next writer.
//! - Writers hold `runsIndex.lock` exclusively, readers share it, so a reader never sees a
//!   compaction half done.
//! - A missing journal means an index written by an earlier baton (or a removed file): the index
//!   is then rebuilt from the run directories before the first change.
//!
//! The index is only a view: every run directory holds its own `run.json`, and `reindex`
//! rebuilds both files from those (module `reindex`).

use crate::durable::atomic_write;
use crate::home::StoreError;
use crate::jsonl::JsonlWriter;
use crate::run_meta::{RunMetadata, bound_waiting_for};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

pub(crate) const SNAPSHOT: &str = "runsIndex.json";
pub(crate) const JOURNAL: &str = "runsIndex.journal.jsonl";
const LOCK: &str = "runsIndex.lock";
/// The journal is folded into `runsIndex.json` once it is larger than this.
pub(crate) const COMPACT_AT: u64 = 1 << 20;
/// First guess of the bytes one record line takes, for reading the newest runs from the end.
const LINE_GUESS: u64 = 512;

/// Something the caller should tell the user about, while the operation itself went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreWarning {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for StoreWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why the index cannot be read as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Neither file exists.
    Missing,
    /// `runsIndex.json` without a journal: written by an earlier baton.
    NoJournal,
    /// A file is unreadable or inconsistent.
    Damaged(String),
    /// Nothing wrong: a rebuild was asked for (`baton runs reindex`).
    Requested,
}

#[derive(Debug)]
pub(crate) enum LoadError {
    Problem(Problem),
    Io(StoreError),
}

impl From<StoreError> for LoadError {
    fn from(e: StoreError) -> LoadError {
        LoadError::Io(e)
    }
}

/// Runs read from the index, newest first.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub runs: Vec<RunMetadata>,
    /// The limit left runs out.
    pub more: bool,
}

/// The index as read under the lock, not yet parsed.
pub(crate) struct RawIndex {
    journal: Vec<u8>,
    snapshot: Snapshot,
}

enum Snapshot {
    /// The newest records, already parsed (they are few).
    Tail(Vec<RunMetadata>),
    Whole(Vec<u8>),
}

impl RawIndex {
    pub fn parse(self, limit: Option<usize>) -> Result<Loaded, LoadError> {
        let changes =
            parse_journal(&self.journal).map_err(|e| LoadError::Problem(Problem::Damaged(e)))?;
        let mut latest: HashMap<String, RunMetadata> = HashMap::with_capacity(changes.len());
        for change in changes {
            latest.insert(change.run_id.clone(), change);
        }
        let base: Vec<RunMetadata> = match self.snapshot {
            Snapshot::Tail(runs) => runs,
            Snapshot::Whole(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| LoadError::Problem(Problem::Damaged(format!("{SNAPSHOT}: {e}"))))?,
        };
        let mut runs: Vec<RunMetadata> = base
            .into_iter()
            .map(|r| latest.remove(&r.run_id).unwrap_or(r))
            .collect();
        runs.extend(latest.into_values());
        runs.sort_by(|a, b| b.sort_key().cmp(&a.sort_key()));
        let mut more = false;
        if let Some(n) = limit
            && runs.len() > n
        {
            runs.truncate(n);
            more = true;
        }
        Ok(Loaded { runs, more })
    }
}

pub(crate) struct IndexLock(File);

impl Drop for IndexLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

pub(crate) struct RunsIndex {
    dir: PathBuf,
}

impl RunsIndex {
    pub fn new(project_dir: &Path) -> RunsIndex {
        RunsIndex {
            dir: project_dir.to_path_buf(),
        }
    }

    pub fn snapshot_path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT)
    }

    pub fn journal_path(&self) -> PathBuf {
        self.dir.join(JOURNAL)
    }

    /// Exclusive for writers, shared for readers.
    pub fn lock(&self, exclusive: bool) -> Result<IndexLock, StoreError> {
        let path = self.dir.join(LOCK);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(StoreError::io("open", &path))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(StoreError::io("lock", &path))?;
        Ok(IndexLock(file))
    }

    pub fn journal_exists(&self) -> bool {
        self.journal_path().exists()
    }

    /// The newest `limit` runs (all with `None`), newest first. Call under a lock.
    pub fn load(&self, limit: Option<usize>) -> Result<Loaded, LoadError> {
        self.read(limit)?.parse(limit)
    }

    /// The bytes `load` needs. Only this part needs the lock: a reader of a large index parses
    /// after releasing it, so writers are not kept waiting.
    pub fn read(&self, limit: Option<usize>) -> Result<RawIndex, LoadError> {
        let journal_path = self.journal_path();
        let journal = match fs::read(&journal_path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(StoreError::io("read", &journal_path)(e).into()),
        };
        let snapshot_exists = self.snapshot_path().exists();
        let journal = match (journal, snapshot_exists) {
            (None, false) => return Err(LoadError::Problem(Problem::Missing)),
            (None, true) => return Err(LoadError::Problem(Problem::NoJournal)),
            (Some(_), false) => {
                return Err(LoadError::Problem(Problem::Damaged(format!(
                    "{SNAPSHOT} is missing while {JOURNAL} is there"
                ))));
            }
            (Some(j), true) => j,
        };
        let tail = match limit {
            // One more than shown, to know whether there are more.
            Some(n) => self.read_tail(n.saturating_add(1))?,
            None => None,
        };
        let snapshot = match tail {
            Some(runs) => Snapshot::Tail(runs),
            None => {
                let path = self.snapshot_path();
                Snapshot::Whole(fs::read(&path).map_err(StoreError::io("read", &path))?)
            }
        };
        Ok(RawIndex { journal, snapshot })
    }

    /// The last `want` records of `runsIndex.json`, read from its end. `None` when the file is
    /// not in the one-record-per-line, oldest-first form this module writes (the caller then
    /// parses it whole, which also tells real damage from another valid layout).
    fn read_tail(&self, want: usize) -> Result<Option<Vec<RunMetadata>>, StoreError> {
        let path = self.snapshot_path();
        let mut file = File::open(&path).map_err(StoreError::io("open", &path))?;
        let len = file
            .metadata()
            .map_err(StoreError::io("stat", &path))?
            .len();
        let mut span = (want as u64)
            .saturating_mul(LINE_GUESS)
            .saturating_add(4096);
        loop {
            let start = len.saturating_sub(span);
            let mut buf = Vec::with_capacity((len - start) as usize);
            file.seek(SeekFrom::Start(start))
                .and_then(|_| (&mut file).take(len - start).read_to_end(&mut buf))
                .map_err(StoreError::io("read", &path))?;
            match parse_tail(&buf, start == 0, want) {
                Tail::Records(runs) => return Ok(Some(runs)),
                Tail::NotOurLayout => return Ok(None),
                Tail::NeedMore if start > 0 => span = span.saturating_mul(4),
                Tail::NeedMore => return Ok(None),
            }
        }
    }

    /// Appends one record to the journal. Returns the journal's size. Call under the exclusive
    /// lock. `durable: false` leaves the record in the page cache: it survives a killed
    /// process, not a power cut.
    pub fn append(&self, run: &RunMetadata, durable: bool) -> Result<u64, StoreError> {
        let path = self.journal_path();
        let mut journal = JsonlWriter::open(&path)?;
        journal.append(run, durable)?;
        Ok(fs::metadata(&path)
            .map_err(StoreError::io("stat", &path))?
            .len())
    }

    /// Replaces the index with exactly `runs` (and an empty journal). Call under the exclusive
    /// lock.
    pub fn write(&self, mut runs: Vec<RunMetadata>) -> Result<(), StoreError> {
        runs.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        let path = self.snapshot_path();
        let mut out = Vec::with_capacity(runs.len() * 400 + 4);
        out.extend_from_slice(b"[\n");
        for (i, run) in runs.iter_mut().enumerate() {
            bound_waiting_for(&mut run.waiting_for);
            if i > 0 {
                out.extend_from_slice(b",\n");
            }
            serde_json::to_writer(&mut out, run).map_err(|e| StoreError::Io {
                action: "encode",
                path: path.clone(),
                source: std::io::Error::other(e),
            })?;
        }
        out.extend_from_slice(if runs.is_empty() { b"]\n" } else { b"\n]\n" });
        // The snapshot first: a crash before the journal is emptied only replays changes the
        // snapshot already holds.
        atomic_write(&path, &out)?;
        atomic_write(&self.journal_path(), b"")
    }

    /// Every record that can still be read from the two files, whatever their damage: the
    /// snapshot line by line, then the journal over it.
    pub fn salvage(&self) -> HashMap<String, RunMetadata> {
        let mut found = HashMap::new();
        if let Ok(bytes) = fs::read(self.snapshot_path()) {
            match serde_json::from_slice::<Vec<RunMetadata>>(&bytes) {
                Ok(all) => found.extend(all.into_iter().map(|r| (r.run_id.clone(), r))),
                Err(_) => found.extend(
                    record_lines(&bytes)
                        .filter_map(|l| serde_json::from_slice::<RunMetadata>(l).ok())
                        .map(|r| (r.run_id.clone(), r)),
                ),
            }
        }
        if let Ok(bytes) = fs::read(self.journal_path()) {
            found.extend(
                record_lines(&bytes)
                    .filter_map(|l| serde_json::from_slice::<RunMetadata>(l).ok())
                    .map(|r| (r.run_id.clone(), r)),
            );
        }
        found
    }

    /// Moves damaged index files aside (nothing is deleted); returns the new names.
    pub fn keep_damaged(&self, stamp: u64) -> Vec<PathBuf> {
        let mut kept = Vec::new();
        for path in [self.snapshot_path(), self.journal_path()] {
            let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            let aside = path.with_file_name(format!("{name}.damaged-{stamp}"));
            if path.exists() && fs::rename(&path, &aside).is_ok() {
                kept.push(aside);
            }
        }
        kept
    }
}

/// The complete lines of the journal as records. A line without its `\n` is a torn append and
/// is skipped; a complete line that is not a record is damage.
fn parse_journal(bytes: &[u8]) -> Result<Vec<RunMetadata>, String> {
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for (n, line) in bytes[..complete].split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let run = serde_json::from_slice(line)
            .map_err(|e| format!("line {} of {JOURNAL}: {e}", n + 1))?;
        out.push(run);
    }
    Ok(out)
}

/// Lines that look like one record each (`{…}` with an optional trailing comma).
fn record_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == b'\n').filter_map(|line| {
        let line = line.trim_ascii();
        let line = line.strip_suffix(b",").unwrap_or(line).trim_ascii_end();
        line.starts_with(b"{").then_some(line)
    })
}

enum Tail {
    Records(Vec<RunMetadata>),
    NeedMore,
    NotOurLayout,
}

/// Parses the end of a snapshot written by [`RunsIndex::write`]: `]` last, one record per line
/// before it, oldest first; `[` first when `at_start`.
fn parse_tail(buf: &[u8], at_start: bool, want: usize) -> Tail {
    let mut lines: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
    if !at_start {
        // The first piece may be the end of a line that starts before the buffer.
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim_ascii().is_empty()) {
        lines.pop();
    }
    match lines.pop().map(<[u8]>::trim_ascii) {
        Some(b"]") => {}
        Some(b"[]") if at_start && lines.iter().all(|l| l.trim_ascii().is_empty()) => {
            return Tail::Records(Vec::new());
        }
        _ => return Tail::NotOurLayout,
    }
    if at_start {
        match lines.first().map(|l| l.trim_ascii()) {
            Some(b"[") => {
                lines.remove(0);
            }
            _ => return Tail::NotOurLayout,
        }
    }
    let take = lines.len().min(want);
    let mut runs = Vec::with_capacity(take);
    for line in &lines[lines.len() - take..] {
        let line = line.trim_ascii();
        let line = line.strip_suffix(b",").unwrap_or(line);
        match serde_json::from_slice::<RunMetadata>(line) {
            Ok(run) => runs.push(run),
            Err(_) => return Tail::NotOurLayout,
        }
    }
    if runs.windows(2).any(|w| w[0].sort_key() > w[1].sort_key()) {
        return Tail::NotOurLayout;
    }
    if runs.len() < want && !at_start {
        return Tail::NeedMore;
    }
    Tail::Records(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_meta::{Phase, RunKind};

    fn run(i: u32) -> RunMetadata {
        RunMetadata {
            run_id: format!("{i:08}-0000-7000-8000-000000000000"),
            kind: RunKind::Workflow,
            project_id: "p".into(),
            package_id: "pkg".into(),
            package_sha256: "0".repeat(64),
            workflow_ref: "wf".into(),
            active_agent_id: "sm".into(),
            phase: Phase::Idle,
            created_at: format!("2026-01-01T00:{:02}:{:02}Z", i / 60 % 60, i % 60),
            last_updated_at: "2026-01-01T00:00:00Z".into(),
            current_node_id: Some("n".into()),
            waiting_for: None,
            model: None,
            context: crate::ContextPolicy::Node,
            stop_reason: None,
            usage: None,
            work_tree: None,
        }
    }

    fn index() -> (tempfile::TempDir, RunsIndex) {
        let dir = tempfile::tempdir().unwrap();
        let index = RunsIndex::new(dir.path());
        (dir, index)
    }

    #[test]
    fn the_newest_are_read_from_the_end_and_the_journal_wins() {
        let (_dir, index) = index();
        index.write((0..500).map(run).collect()).unwrap();
        let mut changed = run(10);
        changed.phase = Phase::Completed;
        index.append(&changed, true).unwrap();
        index.append(&run(900), true).unwrap();
        let newest = index.load(Some(3)).unwrap();
        let ids: Vec<u32> = newest
            .runs
            .iter()
            .map(|r| r.run_id[..8].parse().unwrap())
            .collect();
        assert_eq!(ids, [900, 499, 498]);
        assert!(newest.more);
        let all = index.load(None).unwrap();
        assert_eq!(all.runs.len(), 501);
        assert!(!all.more);
        let ten = all
            .runs
            .iter()
            .find(|r| r.run_id.starts_with("00000010"))
            .unwrap();
        assert_eq!(ten.phase, Phase::Completed);
    }

    #[test]
    fn the_snapshot_stays_a_seed_001_array() {
        let (_dir, index) = index();
        index.write(vec![run(2), run(1)]).unwrap();
        let text = fs::read_to_string(index.snapshot_path()).unwrap();
        let parsed: Vec<RunMetadata> = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, vec![run(1), run(2)]);
        assert_eq!(text.lines().count(), 4, "one record per line: {text}");
        index.write(Vec::new()).unwrap();
        assert_eq!(fs::read_to_string(index.snapshot_path()).unwrap(), "[\n]\n");
        assert!(index.load(Some(5)).unwrap().runs.is_empty());
    }

    #[test]
    fn a_task_run_keeps_its_kind_in_the_snapshot_and_the_journal() {
        let (_dir, index) = index();
        let task = |i| RunMetadata {
            kind: RunKind::Task,
            ..run(i)
        };
        index.write(vec![run(1), task(2)]).unwrap();
        index.append(&task(3), true).unwrap();
        let text = fs::read_to_string(index.snapshot_path()).unwrap();
        assert_eq!(text.matches("\"kind\"").count(), 1, "{text}");
        let all = index.load(None).unwrap().runs;
        assert_eq!(all, vec![task(3), task(2), run(1)]);
    }

    #[test]
    fn another_valid_layout_is_read_whole() {
        let (_dir, index) = index();
        let pretty = serde_json::to_vec_pretty(&vec![run(1), run(2), run(3)]).unwrap();
        fs::write(index.snapshot_path(), pretty).unwrap();
        fs::write(index.journal_path(), b"").unwrap();
        let newest = index.load(Some(2)).unwrap();
        assert_eq!(newest.runs, vec![run(3), run(2)]);
        assert!(newest.more);
    }

    #[test]
    fn a_torn_journal_tail_is_skipped_and_a_bad_line_is_damage() {
        let (_dir, index) = index();
        index.write(vec![run(1)]).unwrap();
        index.append(&run(2), true).unwrap();
        let mut bytes = fs::read(index.journal_path()).unwrap();
        bytes.extend_from_slice(b"{\"runId\":\"torn");
        fs::write(index.journal_path(), &bytes).unwrap();
        assert_eq!(index.load(None).unwrap().runs.len(), 2);
        fs::write(index.journal_path(), b"not json\n").unwrap();
        assert!(matches!(
            index.load(None),
            Err(LoadError::Problem(Problem::Damaged(_)))
        ));
    }

    #[test]
    fn missing_files_are_told_apart() {
        let (_dir, index) = index();
        assert!(matches!(
            index.load(None),
            Err(LoadError::Problem(Problem::Missing))
        ));
        fs::write(index.snapshot_path(), b"[]").unwrap();
        assert!(matches!(
            index.load(None),
            Err(LoadError::Problem(Problem::NoJournal))
        ));
        fs::remove_file(index.snapshot_path()).unwrap();
        fs::write(index.journal_path(), b"").unwrap();
        assert!(matches!(
            index.load(None),
            Err(LoadError::Problem(Problem::Damaged(_)))
        ));
    }

    #[test]
    fn salvage_keeps_every_readable_line() {
        let (_dir, index) = index();
        index.write((0..5).map(run).collect()).unwrap();
        let mut text = fs::read_to_string(index.snapshot_path()).unwrap();
        text.truncate(text.len() - 60);
        fs::write(index.snapshot_path(), text).unwrap();
        let found = index.salvage();
        assert_eq!(found.len(), 4);
    }
}
