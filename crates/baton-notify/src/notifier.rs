//! The queue between a run and its webhooks: [`Notifier::send`] never blocks (a bounded queue
//! per webhook, an event that finds it full is logged as dropped); a thread per webhook
//! delivers in order. [`Notifier::close`] then [`Closing::wait`] (or dropping the notifier)
//! give what is still queued a bounded grace period (the longest per-try timeout, at most
//! [`MAX_GRACE`]), then log the rest as abandoned.

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

/// Queued or in flight: `(delivery id, event, project)`.
type Pending = Arc<Mutex<Vec<(String, String, String)>>>;

struct Lane {
    webhook: Webhook,
    tx: SyncSender<Event>,
    /// Signalled when the thread has delivered everything and ended.
    done: Receiver<()>,
    pending: Pending,
}

pub struct Notifier {
    /// Emptied by [`Notifier::close`].
    lanes: Mutex<Vec<Lane>>,
    home: PathBuf,
    grace: Duration,
}

/// What [`Notifier::close`] left to wait for.
pub struct Closing {
    lanes: Vec<(Webhook, Receiver<()>, Pending)>,
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
            .filter_map(|w| Lane::start(w, home.to_path_buf(), public_url.clone()))
            .collect();
        Notifier {
            lanes: Mutex::new(lanes),
            home: home.to_path_buf(),
            grace,
        }
    }

    /// A notifier without webhooks.
    pub fn disabled() -> Notifier {
        Notifier::new(NotifyConfig::default(), Path::new(""))
    }

    pub fn is_enabled(&self) -> bool {
        self.lanes.lock().map(|l| !l.is_empty()).unwrap_or(false)
    }

    /// Queues `event` for every webhook that wants it; returns at once.
    pub fn send(&self, event: Event) {
        let Ok(lanes) = self.lanes.lock() else {
            return;
        };
        for lane in lanes.iter() {
            if !lane.webhook.wants(event.kind) {
                continue;
            }
            let id = event.delivery_id();
            let kind = event.kind.as_str().to_string();
            if let Ok(mut p) = lane.pending.lock() {
                p.push((id.clone(), kind.clone(), event.project.clone()));
            }
            if let Err(TrySendError::Full(e) | TrySendError::Disconnected(e)) =
                lane.tx.try_send(event.clone())
            {
                forget(&lane.pending, &id);
                log_unsent(
                    &self.home,
                    &lane.webhook,
                    &id,
                    &kind,
                    &e.project,
                    Outcome::Dropped,
                );
            }
        }
    }

    /// Stops taking events; what is queued is still delivered (see [`Closing::wait`]).
    pub fn close(&self) -> Closing {
        let lanes = self
            .lanes
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        Closing {
            // Dropping each sender ends its thread once the queue is empty.
            lanes: lanes
                .into_iter()
                .map(|l| (l.webhook, l.done, l.pending))
                .collect(),
            home: self.home.clone(),
            grace: self.grace,
        }
    }
}

impl Closing {
    /// Waits for the queued deliveries up to the grace period, then logs what is left as
    /// abandoned.
    pub fn wait(self) {
        let deadline = Instant::now() + self.grace;
        for (webhook, done, pending) in self.lanes {
            let left = deadline.saturating_duration_since(Instant::now());
            if done.recv_timeout(left).is_ok() {
                continue;
            }
            let left_over = pending.lock().map(|p| p.clone()).unwrap_or_default();
            for (id, kind, project) in left_over {
                log_unsent(
                    &self.home,
                    &webhook,
                    &id,
                    &kind,
                    &project,
                    Outcome::Abandoned,
                );
            }
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.close().wait();
    }
}

fn log_unsent(home: &Path, w: &Webhook, id: &str, kind: &str, project: &str, outcome: Outcome) {
    let _ = log::append(
        home,
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

fn forget(pending: &Pending, id: &str) {
    if let Ok(mut p) = pending.lock()
        && let Some(i) = p.iter().position(|(d, _, _)| d == id)
    {
        p.remove(i);
    }
}

impl Lane {
    /// `None` when no thread can be started (the webhook is then left out).
    fn start(webhook: Webhook, home: PathBuf, public_url: Option<String>) -> Option<Lane> {
        let (tx, rx) = mpsc::sync_channel::<Event>(QUEUE);
        let (done_tx, done) = mpsc::channel();
        let pending: Pending = Arc::new(Mutex::new(Vec::new()));
        let (w, p) = (webhook.clone(), pending.clone());
        std::thread::Builder::new()
            .name(format!("baton-notify-{}", webhook.index))
            .spawn(move || {
                run_lane(&w, &home, public_url.as_deref(), &rx, &p);
                let _ = done_tx.send(());
            })
            .ok()?;
        Some(Lane {
            webhook,
            tx,
            done,
            pending,
        })
    }
}

fn run_lane(
    webhook: &Webhook,
    home: &Path,
    public_url: Option<&str>,
    rx: &Receiver<Event>,
    pending: &Pending,
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
        forget(pending, &event.delivery_id());
    }
}
