//! The pushes of a unit's checkpoint commits to its epoch ref, in the background: one push at a
//! time (two at once could land out of order and move the ref back), always of the newest
//! commit asked for, so a run whose turns come faster than its pushes skips the ones between.
//! A checkpoint never waits for a push unless its record could not carry the files the
//! remote lacks (see `checkpoint`); `confirmed` says which commit the remote holds.

use crate::WorkerError;
use std::sync::{Arc, Condvar, Mutex};

#[derive(Default)]
struct State {
    /// The newest commit asked for.
    wanted: Option<String>,
    /// The last commit pushed to the ref.
    confirmed: Option<String>,
    running: bool,
    /// Why the last push failed (cleared by the next that succeeds).
    error: Option<WorkerError>,
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
}

fn poisoned() -> WorkerError {
    WorkerError::other("WORKER_IO", "the push state was poisoned")
}

impl Pusher {
    pub fn new(tree: &std::path::Path, remote: &str, reference: &str) -> Pusher {
        Pusher {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
            tree: tree.to_path_buf(),
            remote: remote.to_string(),
            reference: reference.to_string(),
        }
    }

    /// The last commit this pusher put on the ref.
    pub fn confirmed(&self) -> Option<String> {
        self.shared.state.lock().ok()?.confirmed.clone()
    }

    /// Asks for `commit` on the ref: a push starts now unless one is under way (the newest
    /// commit asked for goes when it ends).
    pub fn want(&self, commit: &str) -> Result<(), WorkerError> {
        let mut st = self.shared.state.lock().map_err(|_| poisoned())?;
        st.wanted = Some(commit.to_string());
        if st.running || st.confirmed.as_deref() == Some(commit) {
            return Ok(());
        }
        st.running = true;
        drop(st);
        let shared = self.shared.clone();
        let (tree, remote, reference) = (
            self.tree.clone(),
            self.remote.clone(),
            self.reference.clone(),
        );
        std::thread::Builder::new()
            .name("baton-push".into())
            .spawn(move || push_loop(&shared, &tree, &remote, &reference))
            .map(|_| ())
            .map_err(|e| WorkerError::other("WORKER_IO", format!("cannot start a push: {e}")))
    }

    /// Pushes `commit` (if it is not there yet) and waits until the ref holds it; the push's
    /// error if it failed.
    pub fn wait_for(&self, commit: &str) -> Result<(), WorkerError> {
        self.want(commit)?;
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
    }

    /// Waits until no push is under way.
    pub fn settle(&self) {
        let Ok(mut st) = self.shared.state.lock() else {
            return;
        };
        while st.running {
            match self.shared.changed.wait(st) {
                Ok(s) => st = s,
                Err(_) => return,
            }
        }
    }
}

fn push_loop(shared: &Shared, tree: &std::path::Path, remote: &str, reference: &str) {
    // The push runs beside the run's next turns, on the same cores: it yields to them. On
    // Linux the nice value is the thread's, and the git processes it starts inherit it.
    // SAFETY: setpriority takes no pointer; 0 names the calling thread.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
    loop {
        let target = match shared.state.lock() {
            Ok(st) => st.wanted.clone(),
            Err(_) => return,
        };
        let result = match &target {
            Some(commit) => crate::git::push(tree, remote, commit, reference),
            None => Ok(()),
        };
        let Ok(mut st) = shared.state.lock() else {
            return;
        };
        let again = match result {
            Ok(()) => {
                st.confirmed = target;
                st.error = None;
                st.wanted != st.confirmed
            }
            Err(e) => {
                st.error = Some(e);
                false
            }
        };
        if !again {
            st.running = false;
            shared.changed.notify_all();
            return;
        }
        shared.changed.notify_all();
    }
}
