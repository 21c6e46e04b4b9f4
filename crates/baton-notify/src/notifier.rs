//! The queue between a run and its webhooks: [`Notifier::send`] never blocks (a bounded queue
//! per webhook, an event that finds it full is logged as dropped); a thread per webhook
//! delivers in order. [`Notifier::finish`] gives what is still queued a bounded grace period
//! (the longest per-try timeout, at most [`MAX_GRACE`]), then logs the rest as abandoned.

use crate::config::{NotifyConfig, Webhook};
use crate::deliver;
use crate::event::Event;
use crate::log::{self, Entry, Outcome};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Events waiting per webhook before new ones are dropped.
pub const QUEUE: usize = 256;
pub const MAX_GRACE: Duration = Duration::from_secs(10);

struct Lane {
    webhook: Webhook,
    tx: Option<SyncSender<Event>>,
    /// Signalled when the thread has delivered everything and ended.
    done: Receiver<()>,
    /// Queued or in flight: `(delivery id, event, project)`.
    pending: Arc<Mutex<Vec<Pending>>>,
}

type Pending = (String, String, String);

pub struct Notifier {
    lanes: Vec<Lane>,
    home: PathBuf,
    grace: Duration,
}

impl Notifier {
    /// A notifier for the webhooks of `config`, logging in the store at `home`; with none,
    /// it does nothing and starts no thread.
    pub fn new(config: NotifyConfig, home: &Path) -> Notifier {
        let grace = config
            .webhooks
            .iter()
            .map(|w| w.timeout)
            .max()
            .unwrap_or_default()
            .min(MAX_GRACE);
        let public_url = config.public_url.clone();
        let lanes = config
            .webhooks
            .into_iter()
            .map(|w| Lane::start(w, home.to_path_buf(), public_url.clone()))
            .collect();
        Notifier {
            lanes,
            home: home.to_path_buf(),
            grace,
        }
    }

    /// A notifier without webhooks.
    pub fn disabled() -> Notifier {
        Notifier {
            lanes: Vec::new(),
            home: PathBuf::new(),
            grace: Duration::ZERO,
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.lanes.is_empty()
    }

    /// Queues `event` for every webhook that wants it; returns at once.
    pub fn send(&self, event: Event) {
        for lane in &self.lanes {
            if !lane.webhook.wants(event.kind) {
                continue;
            }
            let Some(tx) = &lane.tx else { continue };
            let id = event.delivery_id();
            let kind = event.kind.as_str().to_string();
            let project = event.project.clone();
            if let Ok(mut p) = lane.pending.lock() {
                p.push((id.clone(), kind.clone(), project.clone()));
            }
            match tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    lane.forget(&id);
                    self.log_unsent(&lane.webhook, &id, &kind, &project, Outcome::Dropped);
                }
            }
        }
    }

    /// Waits for the queued deliveries up to the grace period, then logs what is left as
    /// abandoned. Called by drop too.
    pub fn finish(&mut self) {
        let deadline = Instant::now() + self.grace;
        for lane in &mut self.lanes {
            lane.tx = None;
        }
        let lanes = std::mem::take(&mut self.lanes);
        for lane in lanes {
            let left = deadline.saturating_duration_since(Instant::now());
            if lane.done.recv_timeout(left).is_ok() {
                continue;
            }
            let pending = lane.pending.lock().map(|p| p.clone()).unwrap_or_default();
            for (id, kind, project) in pending {
                self.log_unsent(&lane.webhook, &id, &kind, &project, Outcome::Abandoned);
            }
        }
    }

    fn log_unsent(&self, w: &Webhook, id: &str, kind: &str, project: &str, outcome: Outcome) {
        let _ = log::append(
            &self.home,
            &Entry {
                at: crate::event::now_rfc3339(),
                delivery: id.to_string(),
                event: kind.to_string(),
                project: project.to_string(),
                webhook: w.label(),
                attempt: 0,
                outcome,
                status: None,
                error: None,
                millis: 0,
            },
        );
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Lane {
    fn start(webhook: Webhook, home: PathBuf, public_url: Option<String>) -> Lane {
        let (tx, rx) = mpsc::sync_channel::<Event>(QUEUE);
        let (done_tx, done) = mpsc::channel();
        let pending = Arc::new(Mutex::new(Vec::new()));
        let lane = Lane {
            webhook: webhook.clone(),
            tx: Some(tx),
            done,
            pending: pending.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("baton-notify-{}", webhook.index))
            .spawn(move || {
                run_lane(&webhook, &home, public_url.as_deref(), &rx, &pending);
                let _ = done_tx.send(());
            });
        if spawned.is_err() {
            // No thread: events queue up to the bound, then are logged as dropped.
        }
        lane
    }

    fn forget(&self, id: &str) {
        if let Ok(mut p) = self.pending.lock()
            && let Some(i) = p.iter().position(|(d, _, _)| d == id)
        {
            p.remove(i);
        }
    }
}

fn run_lane(
    webhook: &Webhook,
    home: &Path,
    public_url: Option<&str>,
    rx: &Receiver<Event>,
    pending: &Mutex<Vec<Pending>>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let client = deliver::client();
    let (Ok(runtime), Ok(client)) = (runtime, client) else {
        return;
    };
    while let Ok(event) = rx.recv() {
        runtime.block_on(deliver::deliver(
            &client,
            home,
            webhook,
            public_url,
            &event,
            deliver::TRIES,
        ));
        let id = event.delivery_id();
        if let Ok(mut p) = pending.lock()
            && let Some(i) = p.iter().position(|(d, _, _)| *d == id)
        {
            p.remove(i);
        }
    }
}
