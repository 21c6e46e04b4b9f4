#!/usr/bin/env bash
# The work queue's claims on a throwaway PostgreSQL cluster (Debian's postgresql package; run as
# `nobody` when root), fsync on, 16 clients: claims per second and claim latency (median, p99)
# at 1,000 / 10,000 / 100,000 queued units, then a worker's cycle (claim, heartbeat, one fenced
# write, complete), status and one expiry sweep. The load average is printed before each run:
# the machine's other work shares its cores with the server and the clients.
#
# Usage: bench/queue_claims.sh [RUNS] [-- example arguments]
#   e.g. bench/queue_claims.sh 3 -- --clients 16 --claims 4000 --sizes 1000,10000,100000
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
shift || true
[ "${1:-}" = "--" ] && shift
cargo build --release --quiet -p baton-queue --example queue_claims
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/queue_claims
for i in $(seq 1 "$runs"); do
  echo "== run $i of $runs; $(uptime | sed 's/.*load/load/')"
  "$bin" "$@"
  echo
done
