//! What every slot of one worker process shares: its options, its event sink, the lock on the
//! mirror cache and the secret unit folder names derive from.

use crate::event::{Events, WorkerEvent};
use crate::git;
use crate::options::WorkerOptions;
use std::path::PathBuf;

pub(crate) struct Ctx {
    pub(crate) options: WorkerOptions,
    events: Events,
    /// Git commands on the shared mirror cache, one at a time.
    pub(crate) git_lock: std::sync::Mutex<()>,
    /// This process's secret for unit folder names.
    folder_key: [u8; 32],
}

impl Ctx {
    pub(crate) fn new(options: WorkerOptions, events: Events) -> Ctx {
        Ctx {
            options,
            events,
            git_lock: std::sync::Mutex::new(()),
            folder_key: process_secret(),
        }
    }

    pub(crate) fn emit(&self, event: WorkerEvent) {
        (self.events)(&event);
    }

    /// Where a claimed unit's worktree, package and scratch store go:
    /// `<home>/worker/units/<id>-<epoch>-<tag>`, the tag derived from a secret of this process,
    /// so no unit can name another's folder (and none can see the folder that holds them: the
    /// whole home is hidden from commands, see [`crate::run`]).
    pub(crate) fn unit_folder(&self, lease: &baton_queue::Lease) -> PathBuf {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(self.folder_key);
        h.update(lease.id.to_le_bytes());
        h.update(lease.epoch.to_le_bytes());
        let tag = git::hex(&h.finalize()[..12]);
        self.options
            .home
            .join("worker/units")
            .join(format!("{}-{}-{tag}", lease.id, lease.epoch))
    }
}

/// A secret of this process: the kernel's random bytes, or (should they fail) the time and
/// the process id hashed.
fn process_secret() -> [u8; 32] {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut bytes = [0u8; 32];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = Sha256::digest(format!("{now}:{}", std::process::id())).into();
    }
    bytes
}
