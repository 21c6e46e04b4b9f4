//! `decisions.ndjson`: one line per settled gate, appended by the binary (in maestro the model
//! writes it by hand, or forgets to). The line is written and fsynced before status.json is
//! renamed into place (in the same device flush as its temp file), so a crash between the two
//! leaves a logged decision whose `revision` is ahead of the file. That
//! gate is still undecided, so it is decided again; [`drop_unapplied`] removes the stale line
//! first, and the log keeps one line per applied decision.

use super::error::{RalphError, Result};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const FILE: &str = "decisions.ndjson";

/// Appends one record as a line and fsyncs it (and the session folder, for a new log).
pub fn append(session_dir: &Path, record: &Value) -> Result<()> {
    let sync = append_unsynced(session_dir, record)?;
    let paths: Vec<&Path> = sync.iter().map(PathBuf::as_path).collect();
    baton_store::durable::sync_all(&paths)?;
    Ok(())
}

/// Appends one record as a line, without an fsync: returns the files to fsync before
/// status.json records the decision (the log, and the session folder when the log is new),
/// for [`super::store::Change::syncing`], which fsyncs them with status.json's temp file in one
/// device flush. A torn last line (a writer killed mid-append) is closed first so the new
/// record stays parseable.
/// The decisions log must be a regular file (a FIFO would hang the verb).
fn regular(file: &File, path: &Path) -> Result<()> {
    baton_autopilot::untrusted::check_regular(file).map_err(|e| RalphError::Failed {
        code: e.code(),
        message: format!("{}: {e}", path.display()),
    })
}

#[must_use = "the line is on the disk only once the returned files are fsynced"]
pub fn append_unsynced(session_dir: &Path, record: &Value) -> Result<Vec<PathBuf>> {
    let path = session_dir.join(FILE);
    let existed = path.exists();
    let mut file = baton_autopilot::untrusted::nonblocking(
        OpenOptions::new().create(true).append(true).read(true),
    )
    .open(&path)
    .map_err(RalphError::io("open", &path))?;
    regular(&file, &path)?;
    let mut line = String::new();
    if !ends_with_newline(&mut file).map_err(RalphError::io("read", &path))? {
        line.push('\n');
    }
    line.push_str(&record.to_string());
    line.push('\n');
    file.write_all(line.as_bytes())
        .map_err(RalphError::io("append to", &path))?;
    let mut sync = vec![path];
    if !existed {
        sync.push(session_dir.to_path_buf());
    }
    Ok(sync)
}

/// Most bytes of the log's end [`drop_unapplied`] looks at: the records it drops are the last
/// few lines.
const UNAPPLIED_WINDOW: u64 = 1024 * 1024;

/// Removes the records at the end of the log that decide gate `index` (named `gate`) at retry
/// `retry` and were never applied (their `revision` is after `applied`, status.json's
/// revision, or missing), and a torn last line. The caller is deciding that gate now, under the
/// session lock, so these were appended by a decide whose status.json write never happened (a
/// crash between the two): keeping them would log the gate twice. A record status.json did
/// apply stays: an escalation that paused the session left its gate pending, and deciding the
/// gate after the pause adds a line. Returns how many lines were removed.
pub fn drop_unapplied(
    session_dir: &Path,
    index: usize,
    gate: &str,
    retry: u64,
    applied: u64,
) -> Result<usize> {
    let path = session_dir.join(FILE);
    let mut file =
        match baton_autopilot::untrusted::nonblocking(OpenOptions::new().read(true).write(true))
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(RalphError::io("open", &path)(e)),
        };
    regular(&file, &path)?;
    let read = |file: &mut File| -> std::io::Result<(u64, Vec<u8>)> {
        let len = file.metadata()?.len();
        let start = len.saturating_sub(UNAPPLIED_WINDOW);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.take(UNAPPLIED_WINDOW).read_to_end(&mut bytes)?;
        Ok((start, bytes))
    };
    let (start, tail) = read(&mut file).map_err(RalphError::io("read", &path))?;
    let names_gate = |line: &[u8]| {
        serde_json::from_slice::<Value>(line).is_ok_and(|r| {
            r.get("step_index").and_then(Value::as_u64) == Some(index as u64)
                && r.get("node_id").and_then(Value::as_str) == Some(gate)
                && r.get("retry_count").and_then(Value::as_u64) == Some(retry)
                && r.get("revision")
                    .and_then(Value::as_u64)
                    .is_none_or(|rev| rev > applied)
        })
    };
    // `keep`: where what stays ends, within `tail`.
    let mut keep = tail.len();
    let mut dropped = 0;
    match tail.iter().rposition(|b| *b == b'\n') {
        // A torn last line: its append never finished, so nothing applied it.
        Some(nl) if nl + 1 < tail.len() => {
            keep = nl + 1;
            dropped += 1;
        }
        Some(_) => {}
        None if start == 0 && !tail.is_empty() => {
            keep = 0;
            dropped += 1;
        }
        None => return Ok(0),
    }
    while keep > 0 {
        let body_end = keep - 1;
        let line_start = match tail[..body_end].iter().rposition(|b| *b == b'\n') {
            Some(nl) => nl + 1,
            None if start == 0 => 0,
            // The window's first line may start before the window: never judged.
            None => break,
        };
        if !names_gate(&tail[line_start..body_end]) {
            break;
        }
        keep = line_start;
        dropped += 1;
    }
    if dropped > 0 {
        file.set_len(start + keep as u64)
            .and_then(|()| file.sync_data())
            .map_err(RalphError::io("truncate", &path))?;
    }
    Ok(dropped)
}

/// Most bytes read from the end of the file by [`read_last`]: the newest records are what a
/// board shows, and the file only grows.
pub const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;

/// The newest records of a session's decision log, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recent {
    pub records: Vec<Value>,
    /// Lines in the window read that are not a JSON object (a torn last line, a hand edit).
    pub skipped: usize,
    /// Whether older records exist that are not in `records`.
    pub truncated: bool,
}

/// The last `limit` records of `{session_dir}/decisions.ndjson` (none when the file does not
/// exist). Only the last [`MAX_READ_BYTES`] are read; the first line of a window that starts
/// mid-file is dropped, never parsed as a record.
pub fn read_last(session_dir: &Path, limit: usize) -> Result<Recent> {
    let path = session_dir.join(FILE);
    let mut file = match baton_autopilot::untrusted::open_nonblocking(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recent::default()),
        Err(e) => return Err(RalphError::io("open", &path)(e)),
    };
    regular(&file, &path)?;
    let read = |file: &mut File| -> std::io::Result<(Vec<u8>, bool)> {
        let len = file.metadata()?.len();
        let start = len.saturating_sub(MAX_READ_BYTES);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES).read_to_end(&mut bytes)?;
        Ok((bytes, start > 0))
    };
    let (bytes, cut) = read(&mut file).map_err(RalphError::io("read", &path))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if cut && !lines.is_empty() {
        lines.remove(0);
    }
    let mut recent = Recent {
        truncated: cut,
        ..Recent::default()
    };
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(v @ Value::Object(_)) => recent.records.push(v),
            _ => recent.skipped += 1,
        }
    }
    if recent.records.len() > limit {
        recent.records.drain(..recent.records.len() - limit);
        recent.truncated = true;
    }
    Ok(recent)
}

fn ends_with_newline(file: &mut File) -> std::io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A decided gate: its line and status.json's temp file in one device flush, then the
    /// rename and the folder's fsync; the line is there and status.json names the decision.
    #[test]
    fn a_decision_and_its_status_write_wait_for_two_flushes() {
        use crate::testing;
        // The verb without a milestone planner (this gate is a goal audit).
        use crate::testing::decide::{self, DecideArgs};
        let tmp = tempfile::tempdir().unwrap();
        let ctx = testing::context(tmp.path());
        let path = testing::new_session(&ctx, "goal-audit");
        let before = baton_store::durable::flushes_on_this_thread();
        let args = DecideArgs {
            index: "0".into(),
            verdict: "proceed".into(),
            confidence: "90".into(),
            ..DecideArgs::default()
        };
        decide::run(&ctx, None, &args).unwrap();
        let flushes = baton_store::durable::flushes_on_this_thread() - before;
        assert_eq!(
            flushes, 2,
            "a new log, the temp file and the folder share one flush"
        );
        let log = std::fs::read_to_string(path.with_file_name(FILE)).unwrap();
        let line: Value = serde_json::from_str(log.trim_end()).unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(line["revision"], doc["revision"]);
        assert_eq!(line["verdict"], "proceed");
        // `append` on its own (a log that exists): the line's fsync, one flush.
        let before = baton_store::durable::flushes_on_this_thread();
        append(path.parent().unwrap(), &json!({"id": "DEC-x"})).unwrap();
        assert_eq!(baton_store::durable::flushes_on_this_thread() - before, 1);
    }

    #[test]
    fn a_torn_line_does_not_swallow_the_next_record() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "{\"id\":\"DEC-1\"}\n{\"id\":\"DE").unwrap();
        append(dir.path(), &json!({"id": "DEC-2"})).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["id"], "DEC-2");
    }

    #[test]
    fn drop_unapplied_removes_only_the_trailing_records_of_the_gate_decided_now() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            drop_unapplied(dir.path(), 4, "post-verify", 0, 7).unwrap(),
            0
        );
        let gate = |id: &str, index: u64, retry: u64| {
            json!({"id": id, "step_index": index, "node_id": "post-verify", "retry_count": retry})
                .to_string()
        };
        let applied = format!("{}\n{}\n", gate("DEC-1", 4, 0), gate("DEC-2", 9, 1));
        // Two crashes between the append and the status write, the second one mid-append.
        let log = format!(
            "{applied}{}\n{}\n{{\"id\":\"DE",
            gate("DEC-3", 9, 2),
            gate("DEC-4", 9, 2)
        );
        std::fs::write(dir.path().join(FILE), log).unwrap();
        assert_eq!(
            drop_unapplied(dir.path(), 9, "post-verify", 2, 7).unwrap(),
            3
        );
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text, applied);
        // Another gate, or the same gate at another retry, is not touched.
        assert_eq!(
            drop_unapplied(dir.path(), 9, "post-verify", 2, 7).unwrap(),
            0
        );
        assert_eq!(
            drop_unapplied(dir.path(), 9, "post-review", 1, 7).unwrap(),
            0
        );
        assert_eq!(
            drop_unapplied(dir.path(), 4, "post-verify", 0, 7).unwrap(),
            0
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE)).unwrap(),
            applied
        );
    }

    /// An escalation paused the session and left its gate pending; status.json applied it
    /// (revision 7). Deciding the gate after the pause keeps that line; a line ahead of
    /// status.json (revision 8, never applied) goes.
    #[test]
    fn drop_unapplied_keeps_a_record_status_json_applied() {
        let dir = tempfile::tempdir().unwrap();
        let line = |rev: u64| {
            json!({"id": format!("DEC-{rev}"), "step_index": 13, "node_id": "post-debug-escalate",
                "retry_count": 0, "verdict": "escalate", "revision": rev})
            .to_string()
        };
        let applied = format!("{}\n", line(7));
        std::fs::write(dir.path().join(FILE), format!("{applied}{}\n", line(8))).unwrap();
        assert_eq!(
            drop_unapplied(dir.path(), 13, "post-debug-escalate", 0, 7).unwrap(),
            1
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE)).unwrap(),
            applied
        );
        assert_eq!(
            drop_unapplied(dir.path(), 13, "post-debug-escalate", 0, 7).unwrap(),
            0
        );
    }

    #[test]
    fn read_last_keeps_the_newest_records_and_skips_damaged_lines() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_last(dir.path(), 10).unwrap(), Recent::default());
        std::fs::write(
            dir.path().join(FILE),
            "{\"id\":\"DEC-1\"}\nnot json\n[1]\n{\"id\":\"DEC-2\"}\n{\"id\":\"DEC-3\"}\n{\"id\":\"DE",
        )
        .unwrap();
        let r = read_last(dir.path(), 2).unwrap();
        let ids: Vec<&str> = r
            .records
            .iter()
            .map(|v| v["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["DEC-2", "DEC-3"]);
        assert_eq!(r.skipped, 3);
        assert!(r.truncated);
    }

    #[test]
    fn read_last_reads_a_bounded_window_of_a_huge_log() {
        let dir = tempfile::tempdir().unwrap();
        let line = format!("{{\"id\":\"DEC\",\"summary\":\"{}\"}}\n", "x".repeat(1000));
        let n = (MAX_READ_BYTES as usize / line.len()) * 2;
        std::fs::write(dir.path().join(FILE), line.repeat(n)).unwrap();
        let r = read_last(dir.path(), usize::MAX).unwrap();
        assert!(r.truncated);
        assert_eq!(
            r.skipped, 0,
            "the partial first line of the window is dropped"
        );
        assert!(r.records.len() < n && r.records.len() >= n / 2 - 1);
    }
}
