//! The gateway's server: accepts the CLI's connections on the listener it was handed, and
//! answers each request (see [`crate::exchange`] for what one request does).

use crate::config::{GatewayConfig, Limits, Upstream};
use crate::error::GatewayError;
use crate::exchange::{self, Shared, Source};
use crate::meter::Refusal;
use crate::record::{Recorder, Replay};
use crate::upstream;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client has to send a request's head (and a kept-alive connection may idle).
const HEADER_READ: Duration = Duration::from_secs(60);
/// How long [`Gateway::shutdown`] waits for answers being recorded.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// hyper refuses a read buffer under this.
const MIN_HEAD: usize = 8192;

/// A running gateway; it stops accepting when shut down or dropped.
pub struct Gateway {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    accept: Option<JoinHandle<()>>,
}

impl Gateway {
    /// Serves on `listener` (already bound by the caller, possibly inside another network
    /// namespace; the gateway never binds). Call inside a tokio runtime.
    pub async fn start(
        listener: std::net::TcpListener,
        config: GatewayConfig,
    ) -> Result<Gateway, GatewayError> {
        Gateway::start_with(listener, config, Limits::default()).await
    }

    /// [`Gateway::start`] with other bounds.
    pub async fn start_with(
        listener: std::net::TcpListener,
        config: GatewayConfig,
        limits: Limits,
    ) -> Result<Gateway, GatewayError> {
        if config.token.trim().is_empty() {
            return Err(GatewayError::Config(
                "the gateway's per-run token is empty".into(),
            ));
        }
        let source = match &config.upstream {
            Upstream::Live { base_url, api_key } => {
                upstream::check_base(base_url)?;
                let recorder = match &config.record {
                    Some(path) => Some(Recorder::open(
                        path,
                        vec![api_key.clone(), config.token.clone()],
                    )?),
                    None => None,
                };
                Source::Live {
                    client: upstream::client()?,
                    base_url: base_url.clone(),
                    api_key: api_key.clone(),
                    recorder,
                }
            }
            Upstream::Replay { record } => Source::Replay(Mutex::new(Replay::load(record)?)),
        };
        listener
            .set_nonblocking(true)
            .map_err(GatewayError::Listener)?;
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(GatewayError::Listener)?;
        let addr = listener.local_addr().map_err(GatewayError::Listener)?;
        let (refusal, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            wire: config.wire,
            token: config.token,
            meter: config.meter,
            cap: config.max_output_tokens,
            limits,
            source,
            refusal,
            exchanges: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            record_failures: AtomicU64::new(0),
            answers: TaskTracker::new(),
        });
        let stop = CancellationToken::new();
        let accept = tokio::spawn(accept(listener, shared.clone(), stop.clone()));
        Ok(Gateway {
            addr,
            shared,
            stop,
            accept: Some(accept),
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Set when the meter refused a request (the runner then ends the CLI).
    pub fn refusal(&self) -> watch::Receiver<Option<Refusal>> {
        self.shared.refusal.subscribe()
    }

    /// Model requests forwarded or replayed.
    pub fn exchanges(&self) -> u64 {
        self.shared.exchanges.load(Ordering::SeqCst)
    }

    /// Exchanges that could not be appended to the record (a full disk, a removed folder).
    pub fn record_failures(&self) -> u64 {
        self.shared.record_failures.load(Ordering::SeqCst)
    }

    /// Stops accepting, closes open connections, and waits (briefly) for the answers being
    /// settled and recorded.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
        self.shared.answers.close();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.shared.answers.wait()).await;
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept(listener: tokio::net::TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ)
        .max_buf_size(shared.limits.max_request_head.max(MIN_HEAD));
    // Dropped at the end: every open connection is aborted with it.
    let mut connections = JoinSet::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of descriptors: retrying at once would spin.
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(50)) => continue,
                        () = stop.cancelled() => break,
                    }
                }
            },
            () = stop.cancelled() => break,
        };
        while connections.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let builder = builder.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| exchange::handle(shared.clone(), req));
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
