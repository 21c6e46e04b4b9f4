//! The command's output on stdout, written by the `out!` and `outln!` macros.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write failed for another reason than a closed pipe, so it is said only once.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Writes `args` (and a newline) to stdout and flushes it, so a line is out before the
/// process goes on with long work. A closed pipe ends the process with exit 0: the reader
/// went away, nothing is left to say, and a run it was printing is kept as a kill would keep
/// it (resumable). Another error (a full disk behind `>`) is said once on stderr.
pub fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| {
            if newline {
                out.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            std::process::exit(i32::from(crate::exit::OK))
        }
        Err(e) => {
            if !FAILED.swap(true, Ordering::Relaxed) {
                eprintln!("warning: cannot write the output: {e}");
            }
        }
    }
}
