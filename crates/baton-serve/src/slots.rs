//! Which connection gives its slot up when a new one needs it. At the limit, the connection
//! that has waited longest for a request's headers (a half-sent request, or a kept-alive
//! connection idle between requests) is closed to make room, so a local process holding
//! thousands of half-open connections cannot keep the page from answering. A connection
//! answering a request (headers read, answer not fully handed over: an SSE stream, a handler
//! at work) is never closed for this; when every slot is such a one, the new connection waits
//! until one finishes.

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::Service;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// The slots of a server's connections (clones share them).
#[derive(Clone)]
pub struct Slots {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// A slot freed, a connection began to wait for headers, or an eviction was undone.
    changed: Notify,
}

struct State {
    limit: usize,
    /// Connections holding a slot (evicted ones included until they are gone).
    open: usize,
    /// Evicted connections not gone yet: each frees a slot soon.
    leaving: usize,
    /// Ids and waiting order both come from this counter: a new connection waits from its
    /// id (when it was accepted), a kept-alive one from the end of its last answer.
    next: u64,
    /// Connections waiting for a request's headers, by when they began to wait.
    waiting: BTreeMap<u64, u64>,
    conns: HashMap<u64, Conn>,
}

struct Conn {
    /// The key in `waiting` while the connection waits for headers.
    since: Option<u64>,
    /// Requests whose answer is not fully handed over yet (one at a time in HTTP/1).
    busy: usize,
    evicted: bool,
    close: CancellationToken,
}

impl State {
    fn tick(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every step, so a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slots {
    pub fn new(limit: usize) -> Slots {
        Slots {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    limit: limit.max(1),
                    open: 0,
                    leaving: 0,
                    next: 0,
                    waiting: BTreeMap::new(),
                    conns: HashMap::new(),
                }),
                changed: Notify::new(),
            }),
        }
    }

    /// Returns once one more connection may be served, evicting the connection that has
    /// waited longest for headers if needed. With none to evict, waits until a connection
    /// closes or finishes a request.
    pub async fn room(&self) {
        while !self.make_room() {
            self.shared.changed.notified().await;
        }
    }

    /// Whether a slot is free; if not and no eviction is under way, starts one.
    fn make_room(&self) -> bool {
        let mut state = self.shared.lock();
        if state.open < state.limit {
            return true;
        }
        // One eviction frees the one slot wanted: evicting more would close connections for
        // nothing.
        if state.leaving == 0
            && let Some((_, id)) = state.waiting.pop_first()
            && let Some(conn) = state.conns.get_mut(&id)
        {
            conn.since = None;
            conn.evicted = true;
            conn.close.cancel();
            state.leaving += 1;
        }
        false
    }

    /// A slot for a new connection (call [`Slots::room`] first). It cannot be evicted until
    /// [`Slot::waits`]: what the client sent already is read first.
    pub fn open(&self) -> Slot {
        let mut state = self.shared.lock();
        let id = state.tick();
        state.open += 1;
        let close = CancellationToken::new();
        state.conns.insert(
            id,
            Conn {
                since: None,
                busy: 0,
                evicted: false,
                close: close.clone(),
            },
        );
        Slot {
            handle: Handle {
                shared: self.shared.clone(),
                id,
            },
            close,
        }
    }

    /// Returns once no connection holds a slot.
    pub async fn all_closed(&self) {
        while self.shared.lock().open > 0 {
            self.shared.changed.notified().await;
        }
    }

    /// Connections holding a slot.
    pub fn open_now(&self) -> usize {
        self.shared.lock().open
    }

    /// Connections waiting for a request's headers (evictable).
    pub fn waiting_now(&self) -> usize {
        self.shared.lock().waiting.len()
    }
}

/// One connection's slot, freed on drop.
pub struct Slot {
    handle: Handle,
    close: CancellationToken,
}

impl Slot {
    /// Resolves when the connection is evicted.
    pub fn evicted(&self) -> WaitForCancellationFuture<'_> {
        self.close.cancelled()
    }

    /// The connection's first bytes were read (or none came in time): unless a request is
    /// being answered, it joins the line of those waiting for headers, by when it was accepted.
    pub fn waits(&self) {
        let shared = &self.handle.shared;
        let mut state = shared.lock();
        let since = self.handle.id;
        let joined = match state.conns.get_mut(&self.handle.id) {
            Some(conn) if conn.busy == 0 && conn.since.is_none() && !conn.evicted => {
                conn.since = Some(since);
                true
            }
            _ => false,
        };
        if joined {
            state.waiting.insert(since, self.handle.id);
        }
        drop(state);
        if joined {
            // The accept loop may be waiting for a connection it can evict.
            shared.changed.notify_one();
        }
    }

    /// Whether a request is being answered on the connection: closing it would cut the answer.
    pub fn is_busy(&self) -> bool {
        let state = self.handle.shared.lock();
        state.conns.get(&self.handle.id).is_some_and(|c| c.busy > 0)
    }

    /// `service` with this connection's requests tracked: busy from the moment a request's
    /// headers are read until its answer's body is done.
    pub fn track<S>(&self, service: S) -> Tracked<S> {
        Tracked {
            inner: service,
            handle: self.handle.clone(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let shared = &self.handle.shared;
        let mut state = shared.lock();
        if let Some(conn) = state.conns.remove(&self.handle.id) {
            if let Some(since) = conn.since {
                state.waiting.remove(&since);
            }
            if conn.evicted {
                state.leaving -= 1;
            }
            state.open -= 1;
        }
        drop(state);
        shared.changed.notify_one();
    }
}

#[derive(Clone)]
struct Handle {
    shared: Arc<Shared>,
    id: u64,
}

impl Handle {
    /// A request's headers were read: the connection leaves the waiting line, and an
    /// eviction decided a moment before is undone (the answer is not cut).
    fn begin(&self) -> Busy {
        let mut state = self.shared.lock();
        let mut undone = false;
        if let Some(conn) = state.conns.get_mut(&self.id) {
            conn.busy += 1;
            let since = conn.since.take();
            undone = std::mem::take(&mut conn.evicted);
            if let Some(since) = since {
                state.waiting.remove(&since);
            }
            if undone {
                state.leaving -= 1;
            }
        }
        drop(state);
        if undone {
            // The accept loop was counting on this slot: it evicts another.
            self.shared.changed.notify_one();
        }
        Busy {
            handle: self.clone(),
        }
    }
}

/// A request being answered; on drop the connection waits for the next request's headers.
struct Busy {
    handle: Handle,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let shared = &self.handle.shared;
        let mut state = shared.lock();
        let since = state.tick();
        let now_waiting = match state.conns.get_mut(&self.handle.id) {
            Some(conn) => {
                conn.busy = conn.busy.saturating_sub(1);
                let waits = conn.busy == 0 && !conn.evicted && conn.since.is_none();
                if waits {
                    conn.since = Some(since);
                }
                waits
            }
            None => false,
        };
        if now_waiting {
            state.waiting.insert(since, self.handle.id);
        }
        drop(state);
        if now_waiting {
            // The accept loop may be waiting for a connection it can evict.
            shared.changed.notify_one();
        }
    }
}

/// A connection's service, marking the connection busy while a request is answered.
pub struct Tracked<S> {
    inner: S,
    handle: Handle,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, R, B> Service<R> for Tracked<S>
where
    S: Service<R, Response = hyper::Response<B>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    B: Body + Unpin + 'static,
{
    type Response = hyper::Response<Guarded<B>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn call(&self, request: R) -> Self::Future {
        // hyper calls the service once a request's headers are read.
        let busy = self.handle.begin();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Guarded { body, _busy: busy }))
        })
    }
}

/// An answer's body; the connection stays busy until hyper drops it (sent, or given up).
pub struct Guarded<B> {
    body: B,
    _busy: Busy,
}

impl<B: Body + Unpin> Body for Guarded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evicted(slot: &Slot) -> bool {
        slot.close.is_cancelled()
    }

    /// A connection whose first bytes were read, and no request in them.
    fn waiting(slots: &Slots) -> Slot {
        let slot = slots.open();
        slot.waits();
        slot
    }

    #[test]
    fn a_new_connection_is_not_evicted_before_its_first_bytes_are_read() {
        let slots = Slots::new(1);
        let a = slots.open();
        assert!(!slots.make_room());
        assert!(!evicted(&a));
        a.waits();
        assert!(!slots.make_room());
        assert!(evicted(&a));
    }

    #[test]
    fn at_the_limit_the_longest_waiting_for_headers_is_evicted_one_at_a_time() {
        let slots = Slots::new(3);
        let a = waiting(&slots);
        let b = waiting(&slots);
        let c = waiting(&slots);
        assert!(!slots.make_room());
        assert!(evicted(&a) && !evicted(&b) && !evicted(&c));
        // Until `a` is gone, no second eviction.
        assert!(!slots.make_room());
        assert!(!evicted(&b));
        drop(a);
        assert!(slots.make_room());
        let d = waiting(&slots);
        assert!(!slots.make_room());
        assert!(evicted(&b) && !evicted(&c) && !evicted(&d));
    }

    #[test]
    fn a_busy_connection_is_never_evicted_and_waits_again_after_its_answer() {
        let slots = Slots::new(2);
        let a = waiting(&slots);
        let b = waiting(&slots);
        let busy_a = a.handle.begin();
        let busy_b = b.handle.begin();
        // All busy: nothing to evict, the new connection waits.
        assert!(!slots.make_room());
        assert!(!evicted(&a) && !evicted(&b));
        // `b` answered: it waits for the next request and is the one to go.
        drop(busy_b);
        assert!(!slots.make_room());
        assert!(evicted(&b) && !evicted(&a));
        drop(b);
        assert!(slots.make_room());
        drop(busy_a);
        assert_eq!(slots.open_now(), 1);
    }

    #[test]
    fn headers_read_just_after_an_eviction_undo_it_and_another_is_evicted() {
        let slots = Slots::new(2);
        let a = waiting(&slots);
        let b = waiting(&slots);
        assert!(!slots.make_room());
        assert!(evicted(&a));
        let busy = a.handle.begin();
        assert!(a.is_busy());
        assert!(!slots.make_room());
        assert!(evicted(&b));
        drop(b);
        assert!(slots.make_room());
        // `a` stays until its answer is done, then is not queued (it is closing).
        drop(busy);
        drop(a);
        assert_eq!(slots.open_now(), 0);
        assert!(slots.shared.lock().waiting.is_empty());
    }

    #[test]
    fn an_idle_connection_waits_behind_those_already_waiting() {
        let slots = Slots::new(3);
        let a = waiting(&slots);
        let busy = a.handle.begin();
        let b = waiting(&slots);
        let c = waiting(&slots);
        drop(busy);
        assert!(!slots.make_room());
        assert!(evicted(&b) && !evicted(&a) && !evicted(&c));
    }
}
