#!/usr/bin/env bash
# `baton serve` figures (issue 15): the runs page and the runs API with 10,000 runs in one
# project (target: page under 50 ms), the time from an audit line appended to an SSE client
# receiving it (target: under 100 ms), and the server's memory idle and with 50 open SSE
# streams. Medians; needs python3 (standard library only). Release build.
#
# Usage: bench/serve.sh [RUNS]     (default 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-10000}
cargo build --release --quiet -p baton
cargo build --release --quiet -p baton-store --example gen_runs
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
tmp=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

export BATON_HOME=$tmp/home
# COUNT runs in one project (copies of one real run, see gen_runs.rs) ...
"$bin/examples/gen_runs" "$BATON_HOME" "$tmp/project" "$count" >/dev/null
# ... and one completed demo run (its audit log is the one the SSE figures follow).
"$bin/baton" demo --dir "$tmp/demo" --json >"$tmp/demo.json"

"$bin/baton" serve --port 0 --json >"$tmp/serve.out" 2>"$tmp/serve.err" &
server=$!
for _ in $(seq 1 200); do
  [ -s "$tmp/serve.out" ] && break
  sleep 0.05
done
[ -s "$tmp/serve.out" ] || { echo "baton serve printed nothing" >&2; cat "$tmp/serve.err" >&2; exit 1; }

python3 bench/serve_probe.py \
  --serve "$tmp/serve.out" --pid "$server" --home "$BATON_HOME" \
  --project "$tmp/project" --runs "$count" --demo "$tmp/demo.json"
