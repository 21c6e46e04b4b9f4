//! `decisions.ndjson`: one line per settled gate, appended by the binary (in maestro the model
//! writes it by hand, or forgets to). The line is written and fsynced before status.json, so a
//! crash between the two leaves a logged decision whose `revision` is ahead of the file: a
//! reader can tell it was not applied.

use super::error::{RalphError, Result};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

pub const FILE: &str = "decisions.ndjson";

/// Appends one record as a line. A torn last line (a writer killed mid-append) is closed first
/// so the new record stays parseable.
pub fn append(session_dir: &Path, record: &Value) -> Result<()> {
    let path = session_dir.join(FILE);
    let existed = path.exists();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)
        .map_err(RalphError::io("open", &path))?;
    let mut line = String::new();
    if !ends_with_newline(&mut file).map_err(RalphError::io("read", &path))? {
        line.push('\n');
    }
    line.push_str(&record.to_string());
    line.push('\n');
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(RalphError::io("append to", &path))?;
    if !existed {
        baton_store::durable::sync_dir(session_dir)?;
    }
    Ok(())
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

    #[test]
    fn a_torn_line_does_not_swallow_the_next_record() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "{\"id\":\"DEC-1\"}\n{\"id\":\"DE").unwrap();
        append(dir.path(), &json!({"id": "DEC-2"})).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["id"], "DEC-2");
    }
}
