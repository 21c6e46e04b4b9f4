//! Accepting and serving connections with limits `axum::serve` does not have: a deadline for a
//! request's headers (which is also how long a kept-alive connection may sit idle), a bound on
//! connections open at once, and a bounded graceful stop. At the limit, the connection that
//! has waited longest for headers is closed to make room ([`crate::slots`]), so a local process
//! holding many half-sent requests can neither exhaust the descriptors nor starve the page.

use crate::slots::Slots;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::task::Poll;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;

/// The limits of the connections a server accepts.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once. At the limit, a new one takes the slot of the connection
    /// that has waited longest for a request's headers; when every one is answering a
    /// request, the new one waits (and those behind it, in the listen queue) until one is done.
    pub connections: usize,
    /// How long a client has to send a request's headers, from the moment the server waits
    /// for them: a new connection, or a kept-alive one between requests (its idle timeout).
    pub header_read: Duration,
    /// How long a stopping server lets open connections finish their answer.
    pub grace: Duration,
}

/// Connections open at once, at most (below the usual 1,024 descriptors).
pub const MAX_CONNECTIONS: usize = 512;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: MAX_CONNECTIONS,
            header_read: Duration::from_secs(10),
            // A handler's blocking call ends by its own deadline (10 s), plus time to answer.
            grace: Duration::from_secs(12),
        }
    }
}

/// How long accepting pauses after an error (out of descriptors): retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long a new connection that sends nothing is kept from eviction (one that sends
/// something is kept until its bytes are read).
const FIRST_READ: Duration = Duration::from_millis(50);

/// Connections the kernel holds before they are accepted. Those are out of reach of eviction,
/// so the queue must hold a flood of half-open connections beyond the limit, or a normal
/// client's connection is dropped and retried a second later. Linux caps it at
/// `net.core.somaxconn` (4,096 by default).
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` with [`LISTEN_BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted server can bind while old connections linger.
    #[cfg(not(windows))]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `app` on `listener`, a connection per slot of `slots` (made for
/// `limits.connections`), until `stop` is cancelled, then lets open connections finish for
/// at most `limits.grace`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    slots: Slots,
    stop: CancellationToken,
) {
    let service = TowerToHyperService::new(app);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(_) => {
                    tokio::select! {
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                        () = stop.cancelled() => break,
                    }
                }
            },
            () = stop.cancelled() => break,
        };
        tokio::select! {
            () = slots.room() => {}
            () = stop.cancelled() => break,
        }
        let slot = slots.open();
        let service = slot.track(service.clone());
        let builder = builder.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            // What the client sent already is read before the connection can be evicted, so
            // a request that came with its connection is answered, never evicted unread.
            let _ = tokio::time::timeout(FIRST_READ, stream.readable()).await;
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            let first = std::future::poll_fn(|cx| Poll::Ready(connection.as_mut().poll(cx))).await;
            if first.is_ready() {
                return;
            }
            slot.waits();
            tokio::select! {
                // A connection's error (a client gone, a header deadline) is the client's business.
                _ = connection.as_mut() => return,
                () = slot.evicted() => {}
                () = stop.cancelled() => {}
            }
            // Waiting for headers: nothing is being answered, so the connection just closes
            // (hyper's own graceful stop would wait for half-sent headers).
            if !slot.is_busy() {
                return;
            }
            // Answering (or its headers came in just as it was evicted): the answer finishes,
            // then the connection closes.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
            drop(slot);
        });
    }
    // No new connections from here on.
    drop(listener);
    let _ = tokio::time::timeout(limits.grace, slots.all_closed()).await;
}
