//! Running one confined command to its end: output read on two threads (one when stderr is
//! merged into stdout) and kept up to the caps, head or tail (the rest is drained, so a chatty
//! command never blocks), the exit awaited on a third,
//! a deadline, an abort flag, and at the end, whatever happened, the whole process group
//! killed — a background process the command left behind does not outlive the call.

use baton_sandbox::{Confinement, Signal, kill_group};
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the abort flag is looked at while a command runs.
const ABORT_POLL: Duration = Duration::from_millis(50);
/// How long the output threads may take to finish once the group is dead.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

pub struct ExecRequest<'a> {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub cwd: OwnedFd,
    pub confinement: Confinement,
    pub timeout: Duration,
    pub max_stdout: usize,
    pub max_stderr: usize,
    /// Both streams together; past it the command is stopped.
    pub max_total: u64,
    pub kill_grace: Duration,
    pub abort: Option<&'a (dyn Fn() -> bool + Send + Sync)>,
    /// stderr goes into the stdout pipe, so the two are kept interleaved as written.
    pub merge_stderr: bool,
    /// Keep the last `max_stdout`/`max_stderr` bytes rather than the first.
    pub keep_tail: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Aborted,
    OutputFlood,
}

#[derive(Debug)]
pub struct ExecOutput {
    pub ended: Ended,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Bytes the command wrote to each stream (kept or not).
    pub stdout_total: u64,
    pub stderr_total: u64,
    pub duration: Duration,
}

enum Event {
    Exited(ExitStatus),
    WaitFailed,
    Flood,
    StreamDone,
}

/// Starts the command and supervises it to the end.
pub fn run(req: ExecRequest<'_>) -> Result<ExecOutput, std::io::Error> {
    let mut cmd = Command::new(&req.program);
    cmd.args(&req.args)
        .env_clear()
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    let merged = if req.merge_stderr {
        let (read, write) = std::io::pipe()?;
        cmd.stdout(write.try_clone()?).stderr(write);
        Some(read)
    } else {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    req.confinement.install(&mut cmd, Some(req.cwd));
    let started = Instant::now();
    let spawned = cmd.spawn();
    // The command holds the parent's copies of a merged pipe's write end: without this drop
    // the reader would never see the end of the output.
    drop(cmd);
    let mut child = spawned?;
    let pgid = child.id();
    let (tx, rx) = mpsc::channel::<Event>();
    let total = Arc::new(AtomicU64::new(0));
    let out = Arc::new(Mutex::new(Captured::default()));
    let err = Arc::new(Mutex::new(Captured::default()));
    let mut streams = 0;
    let keep = |cap| Keep {
        cap,
        tail: req.keep_tail,
    };
    if let Some(s) = merged {
        streams += 1;
        reader(
            s,
            out.clone(),
            keep(req.max_stdout),
            total.clone(),
            req.max_total,
            tx.clone(),
        );
    }
    if let Some(s) = child.stdout.take() {
        streams += 1;
        reader(
            s,
            out.clone(),
            keep(req.max_stdout),
            total.clone(),
            req.max_total,
            tx.clone(),
        );
    }
    if let Some(s) = child.stderr.take() {
        streams += 1;
        reader(
            s,
            err.clone(),
            keep(req.max_stderr),
            total.clone(),
            req.max_total,
            tx.clone(),
        );
    }
    let waiter = tx.clone();
    std::thread::spawn(move || {
        let event = match child.wait() {
            Ok(status) => Event::Exited(status),
            Err(_) => Event::WaitFailed,
        };
        let _ = waiter.send(event);
    });
    drop(tx);

    let deadline = started + req.timeout;
    let mut stop: Option<Ended> = None;
    let mut termed_at: Option<Instant> = None;
    let mut status: Option<ExitStatus> = None;
    let mut done_streams = 0;
    loop {
        let now = Instant::now();
        if stop.is_none() {
            if now >= deadline {
                stop = Some(Ended::TimedOut);
            } else if req.abort.is_some_and(|f| f()) {
                stop = Some(Ended::Aborted);
            }
            if stop.is_some() {
                kill_group(pgid, Signal::Term);
                termed_at = Some(now);
            }
        }
        if let Some(at) = termed_at
            && now >= at + req.kill_grace
        {
            kill_group(pgid, Signal::Kill);
        }
        let wait = match termed_at {
            Some(at) => (at + req.kill_grace).saturating_duration_since(now),
            None => deadline.saturating_duration_since(now),
        }
        .clamp(Duration::from_millis(1), ABORT_POLL);
        match rx.recv_timeout(wait) {
            Ok(Event::Exited(s)) => {
                status = Some(s);
                break;
            }
            Ok(Event::WaitFailed) | Err(RecvTimeoutError::Disconnected) => break,
            Ok(Event::Flood) => {
                if stop.is_none() {
                    stop = Some(Ended::OutputFlood);
                    // Output that floods is not worth a grace period.
                    kill_group(pgid, Signal::Kill);
                }
            }
            Ok(Event::StreamDone) => done_streams += 1,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    // The leader is gone; anything it left in its group goes now.
    kill_group(pgid, Signal::Kill);
    let drain_until = Instant::now() + DRAIN_WAIT;
    while done_streams < streams {
        let left = drain_until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::StreamDone) => done_streams += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let duration = started.elapsed();
    let ended = match (stop, status) {
        (Some(reason), _) => reason,
        (None, Some(s)) => match (s.code(), s.signal()) {
            (Some(code), _) => Ended::Exited(code),
            (None, Some(sig)) => Ended::Signaled(sig),
            (None, None) => Ended::Exited(-1),
        },
        (None, None) => Ended::Exited(-1),
    };
    let take = |c: &Arc<Mutex<Captured>>, cap: usize| {
        c.lock()
            .map(|mut c| (c.take(req.keep_tail, cap), c.total))
            .unwrap_or_default()
    };
    let (stdout, stdout_total) = take(&out, req.max_stdout);
    let (stderr, stderr_total) = take(&err, req.max_stderr);
    Ok(ExecOutput {
        ended,
        stdout,
        stderr,
        stdout_total,
        stderr_total,
        duration,
    })
}

#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    total: u64,
}

#[derive(Clone, Copy)]
struct Keep {
    cap: usize,
    tail: bool,
}

impl Captured {
    fn push(&mut self, chunk: &[u8], keep: Keep) {
        self.total += chunk.len() as u64;
        if !keep.tail {
            let room = keep.cap.saturating_sub(self.kept.len());
            self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            return;
        }
        let chunk = &chunk[chunk.len().saturating_sub(keep.cap)..];
        self.kept.extend_from_slice(chunk);
        // Trimmed once it holds twice the cap: amortized, and never more than that.
        if self.kept.len() > keep.cap.saturating_mul(2) {
            let extra = self.kept.len() - keep.cap;
            self.kept.drain(..extra);
        }
    }

    fn take(&mut self, keep_tail: bool, cap: usize) -> Vec<u8> {
        let mut kept = std::mem::take(&mut self.kept);
        if keep_tail && kept.len() > cap {
            kept.drain(..kept.len() - cap);
        }
        kept
    }
}

fn reader(
    mut stream: impl Read + Send + 'static,
    into: Arc<Mutex<Captured>>,
    keep: Keep,
    total: Arc<AtomicU64>,
    max_total: u64,
    tx: mpsc::Sender<Event>,
) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        let mut flooded = false;
        loop {
            let n = match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if let Ok(mut c) = into.lock() {
                c.push(&buf[..n], keep);
            }
            let all = total.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            if all > max_total && !flooded {
                flooded = true;
                let _ = tx.send(Event::Flood);
            }
        }
        let _ = tx.send(Event::StreamDone);
    });
}
