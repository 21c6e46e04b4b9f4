#!/usr/bin/env bash
# A lifecycle session with a replayed model: the orchestration overhead per tick (wall time
# minus model time, medians over every tick of many sessions) and the prompt tokens of its
# task runs against one long conversation doing the same calls. The session is the one of
# `baton demo session`, replayed in process from examples/traces/session-demo/ on fresh copies,
# first under target/ (a disk: real fsyncs), then on a tmpfs when /dev/shm exists (the same
# work without the cost of the durable writes). Usage: bench/session.sh [RUNS] (default 30).
# With BENCH_BASE=<another build's target/release>, that build's example runs too, interleaved
# with this one's, for a before/after on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
cargo build --release --quiet -p baton-lifecycle --example session_overhead
./target/release/examples/session_overhead "$runs"
if [ -d /dev/shm ]; then
  shm=$(mktemp -d /dev/shm/baton-session-bench.XXXXXX)
  trap 'rm -rf "$shm"' EXIT
  SESSION_BENCH_DIR=$shm ./target/release/examples/session_overhead "$runs"
fi
if [ -n "${BENCH_BASE:-}" ]; then
  for _ in 1 2; do
    echo "base:"; "$BENCH_BASE/examples/session_overhead" "$runs"
    echo "this build:"; ./target/release/examples/session_overhead "$runs"
  done
fi
