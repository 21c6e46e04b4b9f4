#!/usr/bin/env bash
# Run creation and `baton runs list` in a project with 1,000 / 10,000 / 50,000 runs (targets at
# 50,000: creation under 20 ms, the default list under 50 ms), optionally against a previous
# build measured in the same run. Needs hyperfine and python3; about 1 GB of disk at 50,000.
#
# Usage: bench/runs_index.sh [--old DIR] [COUNT...]
#   DIR holds `baton` and `examples/create_runs` of the previous implementation, e.g.
#     git worktree add /tmp/old 4656a25
#     cp crates/baton-store/examples/create_runs.rs /tmp/old/crates/baton-store/examples/
#     (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p baton \
#        && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p baton-store --example create_runs)
#     bench/runs_index.sh --old /tmp/old-target/release
set -euo pipefail
cd "$(dirname "$0")/.."
old=""
if [ "${1:-}" = "--old" ]; then old=$2; shift 2; fi
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1000 10000 50000)
creations=${CREATIONS:-30}
cargo build --release --quiet -p baton
cargo build --release --quiet -p baton-store --example gen_runs --example create_runs
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results.jsonl

measure() { # name count home project baton create_runs
  local name=$1 count=$2 home=$3 project=$4 baton=$5 create=$6
  export BATON_HOME=$home
  local shown
  shown=$("$baton" runs list --project "$project" | wc -l)
  hyperfine -N --warmup 3 --runs 20 --export-json "$tmp/h.json" \
    "$baton runs list --project $project" \
    "$baton runs list --project $project --json" >/dev/null
  local size
  size=$(cat "$home"/projects/*/runsIndex.json | wc -c)
  local created
  created=$("$create" "$home" "$project" "$creations")
  python3 - "$tmp/h.json" "$name" "$count" "$shown" "$size" "$created" >>"$results" <<'PY'
import json, sys
h, name, count, shown, size, created = sys.argv[1:]
r = json.load(open(h))["results"]
print(json.dumps({"impl": name, "runs": int(count), "tableLines": int(shown), "indexBytes": int(size),
                  "listMs": r[0]["median"] * 1000, "jsonMs": r[1]["median"] * 1000, **json.loads(created)}))
PY
}

for count in "${counts[@]}"; do
  "$bin/examples/gen_runs" "$tmp/new-$count/home" "$tmp/new-$count/project" "$count"
  measure new "$count" "$tmp/new-$count/home" "$tmp/new-$count/project" "$bin/baton" "$bin/examples/create_runs"
  rm -rf "$tmp/new-$count"
  if [ -n "$old" ]; then
    "$bin/examples/gen_runs" "$tmp/old-$count/home" "$tmp/old-$count/project" "$count" --legacy
    measure old "$count" "$tmp/old-$count/home" "$tmp/old-$count/project" "$old/baton" "$old/examples/create_runs"
    rm -rf "$tmp/old-$count"
  fi
done

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'impl':<5}{'runs':>7}{'index MB':>10}{'create med ms':>15}{'p95':>8}{'max':>8}{'B/create':>10}{'B/life':>10}{'list ms':>9}{'lines':>7}{'--json ms':>11}")
for r in rows:
    print(f"{r['impl']:<5}{r['runs']:>7}{r['indexBytes']/1e6:>10.2f}{r['createMedianMs']:>15.2f}{r['createP95Ms']:>8.2f}{r['createMaxMs']:>8.2f}"
          f"{r['bytesPerCreation']:>10}{r['bytesPerLife']:>10}{r['listMs']:>9.2f}{r['tableLines']:>7}{r['jsonMs']:>11.1f}")
by = {(r['impl'], r['runs']): r for r in rows}
for (impl, n), r in sorted(by.items()):
    o = by.get(('old', n))
    if impl == 'new' and o:
        print(f"{n} runs, old/new: creation {o['createMedianMs']/r['createMedianMs']:.1f}x, "
              f"bytes per creation {o['bytesPerCreation']/r['bytesPerCreation']:.0f}x, "
              f"bytes per life {o['bytesPerLife']/r['bytesPerLife']:.0f}x, default list {o['listMs']/r['listMs']:.1f}x")
PY
