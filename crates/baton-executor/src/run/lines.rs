//! Reading a CLI's output within bounds: stdout line by line (a line and the whole stream
//! capped), stderr into a file (capped), the rest drained so the CLI never blocks on a pipe.

use std::path::Path;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWriteExt};

/// The longest stdout line read (a tool result holding a large file); a longer one is skipped.
pub const MAX_LINE: usize = 8 * 1024 * 1024;
/// The most stdout read as events in one run; the rest is drained unread.
pub const MAX_STDOUT: u64 = 256 * 1024 * 1024;
/// The most stderr kept in the run's `stderr.log`.
pub const MAX_STDERR: u64 = 1024 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line (without its newline) in the buffer.
    Read,
    /// A line longer than the cap, skipped up to its newline.
    TooLong,
    Eof,
}

/// The next line of `reader` into `buf` (cleared first), at most `max` bytes kept.
pub async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Read,
            });
        }
        let (chunk, used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

/// Copies up to `max` bytes of `pipe` into `file`, then drains the rest; returns the bytes seen.
pub async fn capture<R: AsyncRead + Unpin>(
    mut pipe: R,
    file: &Path,
    max: u64,
) -> std::io::Result<u64> {
    use tokio::io::AsyncReadExt;
    let mut out = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .await?;
    let mut kept = (&mut pipe).take(max);
    let copied = tokio::io::copy(&mut kept, &mut out).await?;
    out.flush().await?;
    let drained = tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await?;
    Ok(copied + drained)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[tokio::test]
    async fn lines_are_read_whole_a_long_one_is_skipped_and_the_last_may_lack_its_newline() {
        let input = b"one\n0123456789abc\ntwo\nlast".to_vec();
        let mut reader = BufReader::with_capacity(4, &input[..]);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            let line = next_line(&mut reader, &mut buf, 8).await.expect("read");
            if line == Line::Eof {
                break;
            }
            got.push((line, String::from_utf8_lossy(&buf).to_string()));
        }
        assert_eq!(
            got,
            [
                (Line::Read, "one".to_string()),
                (Line::TooLong, String::new()),
                (Line::Read, "two".to_string()),
                (Line::Read, "last".to_string()),
            ]
        );
    }

    #[tokio::test]
    async fn stderr_is_kept_up_to_its_cap_and_the_rest_drained() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("stderr.log");
        let input = vec![b'x'; 10_000];
        let seen = capture(&input[..], &file, 100).await.expect("capture");
        assert_eq!(seen, 10_000);
        assert_eq!(std::fs::metadata(&file).expect("file").len(), 100);
    }
}
