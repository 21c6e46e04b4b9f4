//! Binding, the router over the API and the pages, and shutdown. The state handlers share is
//! in [`crate::state`].

use crate::auth;
use crate::bounded::Bounded;
use crate::connections::{self, Limits};
use crate::jobs::Jobs;
use crate::slots::Slots;
use crate::token::Token;
use axum::Router;
use baton_queue::DbConfig;
use baton_store::Store;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::hosts::HostRule;
pub use crate::state::{AppState, MAX_STREAMS};

/// How `baton serve` was asked to listen.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub bind: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    pub store: Store,
    /// The work queue's database, when the page shows the queue.
    pub queue: Option<DbConfig>,
}

impl ServeOptions {
    pub fn loopback(store: Store) -> ServeOptions {
        ServeOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            store,
            queue: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the operating system gave no random bytes for the token: {0}")]
    Random(String),
    #[error("the server stopped on an error: {0}")]
    Serve(std::io::Error),
}

impl ServeError {
    pub fn code(&self) -> &'static str {
        match self {
            ServeError::Bind { .. } => "SERVE_BIND_FAILED",
            ServeError::Random(_) => "SERVE_NO_RANDOM",
            ServeError::Serve(_) => "SERVE_FAILED",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            ServeError::Bind { .. } => {
                Some("choose another --port, or stop what listens there".into())
            }
            _ => None,
        }
    }
}

/// A bound server, not yet answering: the caller prints its URL first.
pub struct Bound {
    listener: TcpListener,
    state: AppState,
    addr: SocketAddr,
    limits: Limits,
    slots: Slots,
}

/// Binds the address and makes the token.
pub async fn bind(options: ServeOptions) -> Result<Bound, ServeError> {
    let token = Token::generate().map_err(|e| ServeError::Random(e.to_string()))?;
    bind_with_token(options, token).await
}

/// [`bind`] with a given token (tests).
pub async fn bind_with_token(options: ServeOptions, token: Token) -> Result<Bound, ServeError> {
    let wanted = SocketAddr::new(options.bind, options.port);
    let listener = connections::listen(wanted).map_err(|source| ServeError::Bind {
        addr: wanted,
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: wanted,
        source,
    })?;
    let state = AppState {
        store: options.store,
        token,
        hosts: Arc::new(HostRule {
            ip: addr.ip(),
            port: addr.port(),
        }),
        shutdown: CancellationToken::new(),
        jobs: Jobs::default(),
        poll: Duration::from_millis(50),
        streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
        blocking: Bounded::default(),
        queue: options.queue,
        start_dir: std::env::current_dir().ok(),
    };
    Ok(Bound {
        listener,
        state,
        addr,
        limits: Limits::default(),
        slots: Slots::new(Limits::default().connections),
    })
}

impl Bound {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn token(&self) -> &str {
        self.state.token.as_str()
    }

    /// The address to open: `http://ip:port/?token=…` (`localhost` is not used: the bound IP
    /// is what the `Host` check knows for sure). For an unspecified bind (`0.0.0.0`, `::`),
    /// the loopback address, which a browser on this machine can open.
    pub fn url(&self) -> String {
        let ip = match self.addr.ip() {
            IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let shown = SocketAddr::new(ip, self.addr.port());
        format!("http://{shown}/?token={}", self.state.token.as_str())
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Other connection limits (tests use small ones).
    pub fn with_limits(mut self, limits: Limits) -> Bound {
        self.limits = limits;
        self.slots = Slots::new(limits.connections);
        self
    }

    /// The connections' slots: how many are open and how many wait for headers (tests wait
    /// on these).
    pub fn slots(&self) -> Slots {
        self.slots.clone()
    }

    /// Another bound on handlers' blocking calls (tests use a short deadline).
    pub fn with_blocking(mut self, blocking: Bounded) -> Bound {
        self.state.blocking = blocking;
        self
    }

    /// Answers until `stop` resolves; then SSE streams end, background runs are asked to
    /// stop between steps, and the server waits (bounded) for them to put their files down.
    pub async fn serve(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let state = self.state.clone();
        let shutdown = state.shutdown.clone();
        let app = router(self.state);
        let signal = {
            let shutdown = shutdown.clone();
            async move {
                tokio::select! {
                    () = stop => {}
                    () = shutdown.cancelled() => {}
                }
                shutdown.cancel();
            }
        };
        let watcher = tokio::spawn(signal);
        // Connections still open `grace` after the stop (a slow reader, a handler at its
        // deadline) are dropped: stopping never waits on a client.
        connections::serve(
            self.listener,
            app,
            self.limits,
            self.slots,
            shutdown.clone(),
        )
        .await;
        watcher.abort();
        shutdown.cancel();
        state.jobs.wait(JOB_GRACE).await;
        Ok(())
    }
}

/// How long a stopping server waits for background runs to reach a step boundary.
const JOB_GRACE: Duration = Duration::from_secs(20);

/// The whole application: API, pages and assets, behind the token and `Host` checks.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(crate::api::routes())
        .merge(crate::pages::routes())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::guard,
        ))
        .with_state(state)
}
