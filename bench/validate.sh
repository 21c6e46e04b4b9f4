#!/usr/bin/env bash
# Wall time of `baton validate` on the create-story example, as a directory and as a .bmad,
# against `baton --version` (process start only) measured in the same run.
# Needs hyperfine (Debian: apt-get install hyperfine). Usage: bench/validate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/baton
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" package pack examples/packages/create-story-micro -o "$tmp/cs.bmad" >/dev/null
hyperfine --warmup 20 --runs 200 -N --export-json "$tmp/out.json" \
  -n baseline-version "$bin --version" \
  -n validate-dir "$bin validate examples/packages/create-story-micro" \
  -n validate-bmad "$bin validate $tmp/cs.bmad" >/dev/null
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["baseline-version"]["median"]
print(f"{'command':<18}{'median ms':>10}{'p95 ms':>9}{'vs baseline':>13}")
for name, x in r.items():
    times = sorted(x["times"])
    p95 = times[int(len(times) * 0.95) - 1]
    print(f"{name:<18}{x['median']*1000:>10.2f}{p95*1000:>9.2f}{x['median']/base:>12.2f}x")
PY
