//! Accepting and serving connections with limits `axum::serve` does not have: a deadline for a
//! request's headers (which is also how long a kept-alive connection may sit idle), a bound on
//! connections open at once, and a bounded graceful stop. A local process holding many
//! half-sent requests can then neither exhaust the descriptors nor keep the server busy.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The limits of the connections a server accepts.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; one more waits in the listen queue until another closes.
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

/// Serves `app` on `listener` until `stop` is cancelled, then lets open connections finish for
/// at most `limits.grace`.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: CancellationToken) {
    let service = TowerToHyperService::new(app);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    let slots = Arc::new(Semaphore::new(limits.connections));
    let graceful = GracefulShutdown::new();
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = stop.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(_) => {
                    drop(slot);
                    tokio::select! {
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                        () = stop.cancelled() => break,
                    }
                }
            },
            () = stop.cancelled() => break,
        };
        let connection = builder.serve_connection(TokioIo::new(stream), service.clone());
        let watched = graceful.watch(connection);
        tokio::spawn(async move {
            // A connection's error (a client gone, a header deadline) is the client's business.
            let _ = watched.await;
            drop(slot);
        });
    }
    // No new connections from here on.
    drop(listener);
    let _ = tokio::time::timeout(limits.grace, graceful.shutdown()).await;
}
