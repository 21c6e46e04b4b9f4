#!/usr/bin/env bash
# What git on a model-written tree costs through baton-git (hardened configuration, protected
# files checked, the sandbox) against the same four checkpoint commands run plainly,
# alternately. Release build.
#
# Usage: bench/tree_git.sh [RUNS] [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
n=${2:-30}
cargo build --release --quiet -p baton-tools --example tree_git
target=${CARGO_TARGET_DIR:-$PWD/target}/release
for i in $(seq 1 "$runs"); do
  echo "== run $i of $runs; $(uptime | sed 's/.*load/load/')"
  "$target/examples/tree_git" "$n"
done
