#!/usr/bin/env bash
# Wall time of a whole replayed run (`baton run … --replay`), against `baton --version` and
# `baton validate` measured in the same run, and the prompt size of that run under the `node`
# and `full` context policies. Uses the reference conversation from shared/seeds when it is
# beside the repository, else the demo trace. Needs hyperfine. Usage: bench/replay.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p baton -p baton-engine --examples --bins
bin=$PWD/target/release/baton
trace=$(ls ../shared/seeds/000_*.txt 2>/dev/null | head -1 || true)
[ -n "$trace" ] || trace=examples/traces/create-story-micro.trace.json
echo "trace: $trace"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BATON_HOME=$tmp/home
trace=$(realpath "$trace")
pkg=$PWD/examples/packages/create-story-micro
# The prepare step chains commands, so it needs the shell: never run it with -N.
prep="rm -rf $tmp/p && cp -r $PWD/examples/projects/taskboard $tmp/p"
hyperfine --warmup 3 --runs 30 --export-json "$tmp/out.json" \
  -n baseline-version "$bin --version" \
  -n validate "$bin validate $pkg" \
  --prepare "$prep" -n replay-run "$bin run $pkg --project $tmp/p --replay $trace --non-interactive --json" >/dev/null
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["baseline-version"]["median"]
print(f"{'command':<18}{'median ms':>10}{'p95 ms':>9}{'vs baseline':>13}")
for name, x in r.items():
    t = sorted(x["times"]); p95 = t[int(len(t) * 0.95) - 1]
    print(f"{name:<18}{x['median']*1000:>10.2f}{p95*1000:>9.2f}{x['median']/base:>12.2f}x")
run, val = r["replay-run"]["median"], r["validate"]["median"]
print(f"engine overhead over validate: {(run-val)*1000:.2f} ms for 10 model turns and 38 tool calls "
      f"(~{(run-val)*1000/10:.2f} ms per turn including its tools, ~{(run-val)*1000/38:.2f} ms per tool call)")
PY
./target/release/examples/context_budget "$trace" "$pkg" examples/projects/taskboard
