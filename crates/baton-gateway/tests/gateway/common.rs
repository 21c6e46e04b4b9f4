//! What the gateway tests share: a gateway on a fresh loopback port, a meter that keeps what
//! it was told, and the CLI's side of a request.

use baton_gateway::{
    Admission, Gateway, GatewayConfig, Limits, Meter, Refusal, Settled, Upstream, Wire,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

pub const KEY: &str = "sk-operator-4f1d9c2e7a";
pub const TOKEN: &str = "baton-run-7c0ffee";

/// How long a test waits for an event before failing (never a sleep).
pub const PATIENCE: Duration = Duration::from_secs(20);

pub struct Setup {
    pub wire: Wire,
    pub upstream: Upstream,
    pub meter: Option<Arc<TestMeter>>,
    pub record: Option<PathBuf>,
    pub cap: Option<u64>,
    pub limits: Limits,
}

impl Setup {
    pub fn live(wire: Wire, base_url: String) -> Setup {
        Setup {
            wire,
            upstream: Upstream::Live {
                base_url,
                api_key: KEY.into(),
            },
            meter: None,
            record: None,
            cap: None,
            limits: Limits::default(),
        }
    }

    pub fn replay(wire: Wire, record: PathBuf) -> Setup {
        Setup {
            upstream: Upstream::Replay { record },
            ..Setup::live(wire, String::new())
        }
    }

    pub async fn start(self) -> Gateway {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = GatewayConfig {
            wire: self.wire,
            upstream: self.upstream,
            token: TOKEN.into(),
            meter: self.meter.map(|m| m as Arc<dyn Meter>),
            record: self.record,
            max_output_tokens: self.cap,
        };
        Gateway::start_with(listener, config, self.limits)
            .await
            .unwrap()
    }
}

/// A meter that admits `allow` model requests, then refuses, and keeps what it was told.
pub struct TestMeter {
    pub allow: usize,
    pub admitted: Mutex<Vec<Admission>>,
    pub settled: Mutex<Vec<Settled>>,
    settled_count: watch::Sender<usize>,
}

impl TestMeter {
    pub fn new(allow: usize) -> Arc<TestMeter> {
        Arc::new(TestMeter {
            allow,
            admitted: Mutex::new(Vec::new()),
            settled: Mutex::new(Vec::new()),
            settled_count: watch::channel(0).0,
        })
    }

    /// The first `n` settlements, once they have come.
    pub async fn settled(&self, n: usize) -> Vec<Settled> {
        let mut rx = self.settled_count.subscribe();
        tokio::time::timeout(PATIENCE, rx.wait_for(|c| *c >= n))
            .await
            .expect("the exchange was never settled")
            .unwrap();
        self.settled.lock().unwrap().clone()
    }

    pub fn admitted(&self) -> Vec<Admission> {
        self.admitted.lock().unwrap().clone()
    }
}

impl Meter for TestMeter {
    fn admit(&self, a: &Admission) -> Result<(), Refusal> {
        let mut admitted = self.admitted.lock().unwrap();
        if admitted.len() >= self.allow {
            return Err(Refusal {
                code: "BUDGET_EXCEEDED".into(),
                message: format!("the run's budget allows {} requests", self.allow),
                details: json!({"allowed": self.allow}),
            });
        }
        admitted.push(a.clone());
        Ok(())
    }

    fn settle(&self, s: &Settled) {
        let mut settled = self.settled.lock().unwrap();
        settled.push(s.clone());
        self.settled_count.send_replace(settled.len());
    }
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().unwrap()
}

/// An answer as the CLI got it.
pub struct Got {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The CLI's request: `token` as `x-api-key` (Anthropic) or a bearer token (OpenAI).
pub async fn call(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    wire: Wire,
    body: Option<&Value>,
) -> Got {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = client().request(method, format!("{base}{path}"));
    if let Some(t) = token {
        req = match wire {
            Wire::AnthropicMessages => req
                .header("x-api-key", t)
                .header("anthropic-version", "2023-06-01"),
            _ => req.bearer_auth(t),
        };
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let r = req.send().await.unwrap();
    Got {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.bytes().await.unwrap().to_vec(),
    }
}

/// Everything the CLI could see of an answer, as text.
pub fn seen(got: &Got) -> String {
    format!("{:?}{}", got.headers, got.text())
}

/// SSE text of `data:` payloads, as `ScriptedServer` streams them.
pub fn sse(payloads: &[Value]) -> String {
    payloads.iter().map(|p| format!("data: {p}\n\n")).collect()
}
