#!/usr/bin/env bash
# What baton's model gateway adds to a request: the median and p95 of N requests (default 500,
# after 50 warm-up requests) sent straight to a played Anthropic-shaped upstream on loopback,
# against the same requests through the gateway, bare and with a meter and a record (one
# synced JSONL line per exchange), for a JSON answer and a streamed one. The target is under
# 2 ms added per request (median). Usage: bench/gateway.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p baton-gateway --example gateway_latency
./target/release/examples/gateway_latency "${1:-500}"
