//! Append-only JSONL logs (audit, conversation).
//!
//! A record is one `write` of `<json>\n` on a file opened with `O_APPEND`, so concurrent
//! appenders never interleave inside a line. A crash can still leave a last line without its
//! `\n`: readers skip such a torn tail and say so, and the next writer cuts it off before
//! appending, so it never glues onto a good record.

use crate::home::StoreError;
use serde::Serialize;
use serde_json::Value;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub struct JsonlWriter {
    path: PathBuf,
    file: File,
}

impl JsonlWriter {
    /// Opens (creating if needed) `path` for appending, removing a torn tail left by a crash.
    pub fn open(path: &Path) -> Result<JsonlWriter, StoreError> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(StoreError::io("open", path))?;
        // Repair under an exclusive lock so two writers do not both truncate.
        file.lock().map_err(StoreError::io("lock", path))?;
        let repaired = repair_torn_tail(&mut file, path);
        let _ = file.unlock();
        repaired?;
        Ok(JsonlWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record. `durable` also waits for it to reach the disk.
    pub fn append(&mut self, record: &impl Serialize, durable: bool) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record).map_err(|e| StoreError::Io {
            action: "encode a record for",
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(StoreError::io("append to", &self.path))?;
        if durable {
            crate::durable::count_flush();
            self.file
                .sync_data()
                .map_err(StoreError::io("sync", &self.path))?;
        }
        Ok(())
    }
}

impl JsonlWriter {
    /// Waits until every record appended so far is on the disk: records appended with
    /// `durable: false` and synced once, as a group, cost one device flush.
    pub fn sync(&self) -> Result<(), StoreError> {
        crate::durable::count_flush();
        self.file
            .sync_data()
            .map_err(StoreError::io("sync", &self.path))
    }
}

fn repair_torn_tail(file: &mut File, path: &Path) -> Result<(), StoreError> {
    let len = file.metadata().map_err(StoreError::io("stat", path))?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))
        .and_then(|_| file.read_exact(&mut last))
        .map_err(StoreError::io("read", path))?;
    if last[0] == b'\n' {
        return Ok(());
    }
    // Find the end of the last complete line, reading backwards in chunks.
    let mut end = len;
    let mut cut = 0;
    let mut buf = vec![0u8; 8192];
    'scan: while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(chunk))
            .map_err(StoreError::io("read", path))?;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            cut = start + i as u64 + 1;
            break 'scan;
        }
        end = start;
    }
    file.set_len(cut)
        .map_err(StoreError::io("truncate", path))?;
    crate::durable::count_flush();
    file.sync_data().map_err(StoreError::io("sync", path))
}

/// The records of a JSONL file and what had to be skipped.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JsonlRead {
    pub records: Vec<Value>,
    /// Bytes of an unterminated last line (a write cut short by a crash).
    pub torn_tail_bytes: usize,
    /// 1-based numbers of complete lines that are not JSON.
    pub bad_lines: Vec<usize>,
}

/// Reads every complete record; a missing file reads as empty.
pub fn read(path: &Path) -> Result<JsonlRead, StoreError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JsonlRead::default()),
        Err(e) => return Err(StoreError::io("read", path)(e)),
    };
    Ok(parse(&bytes))
}

pub fn parse(bytes: &[u8]) -> JsonlRead {
    let mut out = JsonlRead::default();
    let complete = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(i) => i + 1,
        None => 0,
    };
    out.torn_tail_bytes = bytes.len() - complete;
    for (n, line) in bytes[..complete].split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(v) => out.records.push(v),
            Err(_) => out.bad_lines.push(n + 1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn appends_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut w = JsonlWriter::open(&path).unwrap();
        w.append(&json!({"a": 1}), true).unwrap();
        w.append(&json!({"b": "x\ny"}), false).unwrap();
        let r = read(&path).unwrap();
        assert_eq!(r.records, vec![json!({"a": 1}), json!({"b": "x\ny"})]);
        assert_eq!(r.torn_tail_bytes, 0);
    }

    #[test]
    fn torn_tail_is_skipped_then_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        fs::write(&path, b"{\"a\":1}\n{\"b\":").unwrap();
        let r = read(&path).unwrap();
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.torn_tail_bytes, 5);
        let mut w = JsonlWriter::open(&path).unwrap();
        w.append(&json!({"c": 3}), true).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"c\":3}\n");
    }

    #[test]
    fn a_file_that_is_all_torn_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        fs::write(&path, vec![b'x'; 20_000]).unwrap();
        JsonlWriter::open(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap().len(), 0);
    }

    #[test]
    fn bad_lines_are_reported() {
        let r = parse(b"{}\nnot json\n\n{}\n");
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.bad_lines, vec![2]);
    }
}
