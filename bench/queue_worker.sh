#!/usr/bin/env bash
# Overhead per model turn of a queued run against the same run on the file store: one played
# multi-turn run (each turn but the last writes a file through the tools) timed with `baton run`
# and, submitted with `baton run --queue`, run by one `baton worker --exit-when-idle` against a
# throwaway PostgreSQL cluster (Debian's postgresql package; run as `nobody` when root; fsync
# on), alternately. Release build. The load average is printed before each run: the machine's
# other work shares its cores with baton, git and the server.
#
# Usage: bench/queue_worker.sh [RUNS] [-- example arguments]
#   e.g. bench/queue_worker.sh 3 -- --reps 7 --steps 3 --delay-ms 0
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
shift || true
[ "${1:-}" = "--" ] && shift
cargo build --release --quiet -p baton --bin baton --example queue_worker
target=${CARGO_TARGET_DIR:-$PWD/target}/release
for i in $(seq 1 "$runs"); do
  echo "== run $i of $runs; $(uptime | sed 's/.*load/load/')"
  "$target/examples/queue_worker" --baton "$target/baton" "$@"
  echo
done
