//! What the gateway adds to a request: the median (and p95) time of N requests sent straight
//! to a played upstream on loopback, against the same requests through the gateway (bare, and
//! with a meter and a record, as a run uses it). Run by `bench/gateway.sh`.
//!
//! `cargo run --release -p baton-gateway --example gateway_latency -- [N]`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement: a failed step ends it

use baton_gateway::{Admission, Gateway, GatewayConfig, Meter, Refusal, Settled, Upstream, Wire};
use baton_llm::testing::{Reply, ScriptedServer};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const WARM_UP: usize = 50;
const TOKEN: &str = "baton-run-bench";

struct Counting(AtomicU64);

impl Meter for Counting {
    fn admit(&self, _: &Admission) -> Result<(), Refusal> {
        Ok(())
    }
    fn settle(&self, s: &Settled) {
        self.0.fetch_add(s.counted_completion, Ordering::Relaxed);
    }
}

fn reply(stream: bool) -> Reply {
    if stream {
        let delta = |t: &str| {
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
                .to_string()
        };
        Reply::Stream {
            payloads: vec![
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 900, "output_tokens": 1}}}).to_string(),
                delta("The story file is written; "),
                delta("the tests pass."),
                json!({"type": "message_delta", "usage": {"output_tokens": 12}}).to_string(),
                json!({"type": "message_stop"}).to_string(),
            ],
            pause: Duration::ZERO,
            break_after: None,
        }
    } else {
        Reply::json(
            200,
            json!({"content": [{"type": "text", "text": "The story file is written."}],
                "usage": {"input_tokens": 900, "output_tokens": 8}}),
        )
    }
}

/// Milliseconds of each of `n` requests to `url`, after a warm-up.
async fn measure(client: &reqwest::Client, url: &str, n: usize, body: &str) -> Vec<f64> {
    let mut times = Vec::with_capacity(n);
    for i in 0..WARM_UP + n {
        let started = Instant::now();
        let r = client
            .post(url)
            .header("x-api-key", TOKEN)
            .header("anthropic-version", "2023-06-01")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let bytes = r.bytes().await.unwrap();
        assert!(!bytes.is_empty());
        if i >= WARM_UP {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times
}

fn median_p95(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[(v.len() * 95 / 100).min(v.len() - 1)])
}

async fn gateway(upstream: &ScriptedServer, metered: bool, dir: &std::path::Path) -> Gateway {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = GatewayConfig {
        wire: Wire::AnthropicMessages,
        upstream: Upstream::Live {
            base_url: upstream.base_url(),
            api_key: "sk-bench".into(),
        },
        token: TOKEN.into(),
        meter: metered.then(|| Arc::new(Counting(AtomicU64::new(0))) as Arc<dyn Meter>),
        record: metered.then(|| dir.join("gateway.jsonl")),
        max_output_tokens: metered.then_some(4096),
    };
    Gateway::start(listener, config).await.unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = json!({"model": "claude-played", "max_tokens": 8192,
        "messages": [{"role": "user", "content": "Write the story file. ".repeat(200)}]});
    println!("| answer | path | median | p95 | added (median) |");
    println!("|---|---|---|---|---|");
    for stream in [false, true] {
        let mut body = body.clone();
        body["stream"] = json!(stream);
        let body = body.to_string();
        let upstream =
            ScriptedServer::start((0..3 * (WARM_UP + n)).map(|_| reply(stream)).collect())
                .await
                .unwrap();
        let direct = median_p95(
            measure(
                &client,
                &format!("{}/messages", upstream.base_url()),
                n,
                &body,
            )
            .await,
        );
        let kind = if stream { "stream" } else { "JSON" };
        println!(
            "| {kind} | direct | {:.3} ms | {:.3} ms | |",
            direct.0, direct.1
        );
        for (metered, name) in [(false, "gateway"), (true, "gateway + meter + record")] {
            let gw = gateway(&upstream, metered, dir.path()).await;
            let through = median_p95(
                measure(&client, &format!("{}/v1/messages", gw.base_url()), n, &body).await,
            );
            println!(
                "| {kind} | {name} | {:.3} ms | {:.3} ms | {:+.3} ms |",
                through.0,
                through.1,
                through.0 - direct.0
            );
            gw.shutdown().await;
        }
    }
}
