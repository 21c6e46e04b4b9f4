#!/usr/bin/env bash
# `baton epic status` on a 500-story board (100 epics of 5 stories, a question waiting on 50
# stories and a review verdict on 100), against `baton --version` (process start only), in the
# same hyperfine run. Then the per-phase cost of the epic loop with a replayed model
# (crates/baton-epic/examples/epic_overhead.rs). Files live under target/, so fsyncs are
# real. Needs hyperfine. Usage: bench/epic_status.sh. With BENCH_BASE=<another build's
# target/release> (e.g. a worktree of an older commit built with --release), that build's
# binary and example run in the same hyperfine run and loop, for a before/after.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p baton -p baton-epic --bins --examples
bin=$PWD/target/release/baton
mkdir -p target
tmp=$(mktemp -d -p "$PWD/target" epic-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export BATON_HOME=$tmp/home
impl=$tmp/board/_bmad-output/implementation-artifacts
mkdir -p "$impl"
python3 - "$impl" <<'PY'
import json, os, sys
impl = sys.argv[1]
lines = ["# generated: 2026-11-22 09:00", "# STATUS DEFINITIONS: see docs", "",
         "generated: 2026-11-22 09:00", "last_updated: 2026-11-22 09:00", "project: big",
         "project_key: NOKEY", "tracking_system: file-system", "story_location: impl", "",
         "development_status:"]
statuses = ["done", "review", "in-progress", "ready-for-dev", "backlog"]
n = 0
for e in range(1, 101):
    lines.append(f"  # Epic {e}")
    lines.append(f"  epic-{e}: in-progress")
    for s in range(1, 6):
        key = f"{e}-{s}-story-number-{n}"
        lines.append(f"  {key}: {statuses[n % 5]}")
        if n % 10 == 0:
            json.dump({"storyKey": key, "phase": "dev", "questions": [
                {"id": "q1", "question": f"question {n}?", "context": "bench", "answer": None}]},
                open(os.path.join(impl, f"{key}.agent-state.json"), "w"), indent=2)
        if n % 5 == 1:
            json.dump({"reviewResult": "approved", "summary": "fine"},
                      open(os.path.join(impl, f"{key}.review.json"), "w"), indent=2)
        n += 1
    lines.append(f"  epic-{e}-retrospective: optional")
open(os.path.join(impl, "sprint-status.yaml"), "w").write("\n".join(lines) + "\n")
print(f"board: {n} stories in 100 epics")
PY
count=$("$bin" epic status -p "$tmp/board" --json | python3 -c 'import json,sys; print(sum(len(e["stories"]) for e in json.load(sys.stdin)["epics"]))')
[ "$count" = 500 ] || { echo "expected 500 stories, got $count" >&2; exit 1; }
base=()
if [ -n "${BENCH_BASE:-}" ]; then
  base=(-n "epic status (base)" "$BENCH_BASE/baton epic status -p $tmp/board"
        -n "epic status --json (base)" "$BENCH_BASE/baton epic status -p $tmp/board --json")
fi
hyperfine --warmup 10 --runs 100 -N --export-json "$tmp/out.json" \
  -n baseline-version "$bin --version" \
  -n "epic status" "$bin epic status -p $tmp/board" \
  -n "epic status --json" "$bin epic status -p $tmp/board --json" "${base[@]}" >/dev/null
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["baseline-version"]["median"]
print(f"{'command':<29}{'median ms':>10}{'p95 ms':>9}{'vs baseline':>13}")
for name, x in r.items():
    t = sorted(x["times"]); p95 = t[int(len(t) * 0.95) - 1]
    print(f"{name:<29}{x['median']*1000:>10.2f}{p95*1000:>9.2f}{x['median']/base:>12.2f}x")
PY
./target/release/examples/epic_overhead 20
if [ -n "${BENCH_BASE:-}" ]; then
  # Interleaved, so both builds see the same machine.
  for _ in 1 2; do
    echo "base:"; "$BENCH_BASE/examples/epic_overhead" 20
    echo "this build:"; ./target/release/examples/epic_overhead 20
  done
fi
