#!/usr/bin/env bash
# Three independent stories (the sample epic 1: create-story, validation, dev, code review and a
# git commit each) against a played model answering every request after a fixed delay:
# sequential and `baton epic run --parallel 3` in alternating pairs, medians and their ratio
# (target: at most 0.40x; the limit is a third of the model's time plus one merge). Also the CPU
# time baton, its git commands and the played model's threads used in each mode (baton's own
# share, steadier than wall time on a shared machine) and the timeline of the last parallel
# run (phase ends, statuses, merges).
# Usage: bench/epic_parallel.sh [delay_ms] [pairs]   (defaults 500 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
export EPIC_FIGURES_DELAY_MS=${1:-500} EPIC_FIGURES_PAIRS=${2:-2}
cargo test --release -q -p baton-epic --test epic epic_parallel_figures:: -- --ignored --nocapture \
  --exact three_stories_alternating 2>&1 | grep -v '^running\|^test result\|^$'
