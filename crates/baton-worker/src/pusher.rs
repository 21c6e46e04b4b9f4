//! The pushes of a unit's checkpoint commits to its epoch ref, in the background: one push at a
//! time (two at once could land out of order and move the ref back), always of the newest
//! commit asked for, so a run whose turns come faster than its pushes skips the ones between.
//! Pushes are paced: one starts at most every `pace` unless a checkpoint needs it sooner (its
//! record would carry too much) or someone waits for it. Each push is several git processes;
//! turns that come fast (a model answering at once) would otherwise share the cores with one
//! push after another, while the records already carry what the remote lacks.
//! A checkpoint never waits for a push unless its record could not carry the files the
//! remote lacks (see `checkpoint`); `confirmed` says which commit the remote holds.

use crate::WorkerError;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a worker's unit pushes its checkpoint commits at most, unless one is needed
/// sooner. A model that takes longer than this to answer gets every commit pushed, while it
/// thinks.
pub(crate) const PUSH_PACE: Duration = Duration::from_secs(1);

struct State {
    /// The newest commit asked for.
    wanted: Option<String>,
    /// The last commit pushed to the ref.
    confirmed: Option<String>,
    running: bool,
    /// Why the last push failed (cleared by the next that succeeds).
    error: Option<WorkerError>,
    /// When the last push started (or the pusher was made): the next waits for the pace.
    last_start: Instant,
    /// The newest commit asked for may not wait for the pace.
    urgent: bool,
    /// Callers waiting for a push: the pace is not kept while any does.
    waiters: usize,
    /// Pushes started so far.
    started: u64,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

pub(crate) struct Pusher {
    shared: Arc<Shared>,
    tree: std::path::PathBuf,
    remote: String,
    reference: String,
    pace: Duration,
}

fn poisoned() -> WorkerError {
    WorkerError::other("WORKER_IO", "the push state was poisoned")
}

impl Pusher {
    /// A pusher of `tree`'s commits to `reference` on `remote`, starting a push at most every
    /// `pace` (the first one `pace` after now).
    pub fn new(tree: &std::path::Path, remote: &str, reference: &str, pace: Duration) -> Pusher {
        Pusher {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    wanted: None,
                    confirmed: None,
                    running: false,
                    error: None,
                    last_start: Instant::now(),
                    urgent: false,
                    waiters: 0,
                    started: 0,
                }),
                changed: Condvar::new(),
            }),
            tree: tree.to_path_buf(),
            remote: remote.to_string(),
            reference: reference.to_string(),
            pace,
        }
    }

    /// The last commit this pusher put on the ref.
    pub fn confirmed(&self) -> Option<String> {
        self.shared.state.lock().ok()?.confirmed.clone()
    }

    /// Asks for `commit` on the ref: pushed when the pace allows (at once when `urgent`), or
    /// after the push under way (the newest commit asked for goes then).
    pub fn want(&self, commit: &str, urgent: bool) -> Result<(), WorkerError> {
        let mut st = self.shared.state.lock().map_err(|_| poisoned())?;
        st.wanted = Some(commit.to_string());
        st.urgent |= urgent;
        if st.running {
            self.shared.changed.notify_all();
            return Ok(());
        }
        if st.confirmed.as_deref() == Some(commit) {
            return Ok(());
        }
        st.running = true;
        drop(st);
        let shared = self.shared.clone();
        let (tree, remote, reference, pace) = (
            self.tree.clone(),
            self.remote.clone(),
            self.reference.clone(),
            self.pace,
        );
        std::thread::Builder::new()
            .name("baton-push".into())
            .spawn(move || push_loop(&shared, &tree, &remote, &reference, pace))
            .map(|_| ())
            .map_err(|e| WorkerError::other("WORKER_IO", format!("cannot start a push: {e}")))
    }

    /// Pushes `commit` now (if it is not there yet) and waits until the ref holds it; the
    /// push's error if it failed.
    pub fn wait_for(&self, commit: &str) -> Result<(), WorkerError> {
        self.hurry(1)?;
        let result = self.want(commit, true).and_then(|()| {
            let mut st = self.shared.state.lock().map_err(|_| poisoned())?;
            loop {
                if st.confirmed.as_deref() == Some(commit) {
                    return Ok(());
                }
                if !st.running {
                    return Err(st.error.take().unwrap_or_else(|| {
                        WorkerError::other("WORKER_GIT_FAILED", "the push stopped")
                    }));
                }
                st = self.shared.changed.wait(st).map_err(|_| poisoned())?;
            }
        });
        let _ = self.hurry(-1);
        result
    }

    /// Pushes what was asked for without waiting for the pace, and waits until no push is
    /// under way.
    pub fn settle(&self) {
        if self.hurry(1).is_err() {
            return;
        }
        if let Ok(mut st) = self.shared.state.lock() {
            while st.running {
                match self.shared.changed.wait(st) {
                    Ok(s) => st = s,
                    Err(_) => return,
                }
            }
        }
        let _ = self.hurry(-1);
    }

    /// Pushes started so far.
    #[cfg(test)]
    pub fn started(&self) -> u64 {
        self.shared.state.lock().map_or(0, |st| st.started)
    }

    /// Waits (without hurrying anything) until no push is under way, for at most `limit`.
    #[cfg(test)]
    pub fn idle_within(&self, limit: Duration) -> bool {
        let Ok(st) = self.shared.state.lock() else {
            return false;
        };
        self.shared
            .changed
            .wait_timeout_while(st, limit, |st| st.running)
            .is_ok_and(|(st, _)| !st.running)
    }

    fn hurry(&self, by: isize) -> Result<(), WorkerError> {
        let mut st = self.shared.state.lock().map_err(|_| poisoned())?;
        st.waiters = st.waiters.saturating_add_signed(by);
        self.shared.changed.notify_all();
        Ok(())
    }
}

/// The next commit to push once the pace allows it (`None`: nothing left to push, and the
/// loop has ended).
fn next_target(shared: &Shared, pace: Duration) -> Option<Option<String>> {
    let mut st = shared.state.lock().ok()?;
    loop {
        if st.wanted == st.confirmed {
            st.running = false;
            shared.changed.notify_all();
            return None;
        }
        let waited = st.last_start.elapsed();
        if st.urgent || st.waiters > 0 || waited >= pace {
            st.urgent = false;
            st.last_start = Instant::now();
            st.started += 1;
            return Some(st.wanted.clone());
        }
        // A timer only for the pace itself: whoever needs the push sooner wakes this.
        st = shared.changed.wait_timeout(st, pace - waited).ok()?.0;
    }
}

fn push_loop(
    shared: &Shared,
    tree: &std::path::Path,
    remote: &str,
    reference: &str,
    pace: Duration,
) {
    // The push runs beside the run's next turns, on the same cores: it yields to them. On
    // Linux the nice value is the thread's, and the git processes it starts inherit it.
    // SAFETY: setpriority takes no pointer; 0 names the calling thread.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
    while let Some(target) = next_target(shared, pace) {
        let result = match &target {
            Some(commit) => crate::git::push(tree, remote, commit, reference),
            None => Ok(()),
        };
        let Ok(mut st) = shared.state.lock() else {
            return;
        };
        match result {
            Ok(()) => {
                st.confirmed = target;
                st.error = None;
            }
            Err(e) => {
                st.error = Some(e);
                st.running = false;
                shared.changed.notify_all();
                return;
            }
        }
        shared.changed.notify_all();
    }
}
