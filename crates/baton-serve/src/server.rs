//! Binding, the router, the state every handler shares, and shutdown.

use crate::auth::{self, Token};
use crate::bounded::Bounded;
use crate::connections::{self, Limits};
use crate::jobs::Jobs;
use crate::slots::Slots;
use axum::Router;
use baton_queue::DbConfig;
use baton_store::Store;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What every handler (API and pages) gets. Cheap to clone: everything is shared.
#[derive(Clone)]
pub struct AppState {
    /// The baton store (`BATON_HOME`): runs, projects, packages. Its calls block on files:
    /// call them through [`AppState::blocking`].
    pub store: Store,
    /// The server's secret. Pages put it in `<meta name="baton-token" content="…">` so their
    /// script can send `Authorization: Bearer …` on POST (the cookie alone is refused there);
    /// another site's page cannot read it.
    pub token: Token,
    /// The `Host` (and `Origin`) values this server answers to.
    pub hosts: Arc<HostRule>,
    /// Cancelled when the server stops: SSE streams end and background runs stop between
    /// steps (they stay resumable).
    pub shutdown: CancellationToken,
    /// Runs and epics the server drives in the background.
    pub jobs: Jobs,
    /// How often an SSE stream looks for new lines in the file it follows.
    pub poll: Duration,
    /// Event streams open at once, at most ([`MAX_STREAMS`]): each holds a task and a
    /// bounded queue, so the server's memory stays bounded however many tabs are open.
    pub streams: Arc<tokio::sync::Semaphore>,
    /// The permit and deadline of every handler's blocking call (store, orchestrator, files).
    pub blocking: Bounded,
    /// The work queue's database (`baton serve --db`): the queue page and `/api/queue`.
    pub queue: Option<DbConfig>,
}

/// Event streams (SSE) open at once, at most; one more is refused with 503.
pub const MAX_STREAMS: usize = 256;

/// The `Host` header values accepted: the bound address and port, `localhost` for a loopback
/// or unspecified bind, and any IP literal for an unspecified bind. A DNS name other than
/// `localhost` is never accepted (a rebound name would otherwise reach the server).
#[derive(Debug, Clone)]
pub struct HostRule {
    pub ip: IpAddr,
    pub port: u16,
}

impl HostRule {
    pub fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if port != self.port {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return self.ip.is_loopback() || self.ip.is_unspecified();
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => ip == self.ip || self.ip.is_unspecified(),
            Err(_) => false,
        }
    }
}

/// `name:port` or `[v6]:port` → (name, port); the port is required (the server never runs on
/// port 80 by default, so a browser always sends it).
fn split_host(host: &str) -> Option<(&str, u16)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        (v6, after.strip_prefix(':')?)
    } else {
        host.rsplit_once(':')?
    };
    Some((name, port.parse().ok()?))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_the_bound_address_or_localhost_never_another_name() {
        let rule = HostRule {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 4000,
        };
        assert!(rule.allows("127.0.0.1:4000"));
        assert!(rule.allows("localhost:4000"));
        assert!(!rule.allows("127.0.0.1:4001"));
        assert!(!rule.allows("127.0.0.1"));
        assert!(!rule.allows("evil.example:4000"));
        assert!(!rule.allows("10.0.0.1:4000"));
        assert!(!rule.allows(""));
        let any = HostRule {
            ip: "0.0.0.0".parse().unwrap(),
            port: 4000,
        };
        assert!(any.allows("10.0.0.1:4000"));
        assert!(!any.allows("rebound.example:4000"));
        let v6 = HostRule {
            ip: "::1".parse().unwrap(),
            port: 4000,
        };
        assert!(v6.allows("[::1]:4000"));
        assert!(!v6.allows("[::2]:4000"));
    }
}
