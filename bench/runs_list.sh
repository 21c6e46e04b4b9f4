#!/usr/bin/env bash
# `baton runs list` over a project with 10,000 runs (target: under 100 ms), against
# `baton --version` in the same run. Needs hyperfine. Usage: bench/runs_list.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-10000}
cargo build --release --quiet
bin=$PWD/target/release/baton
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BATON_HOME=$tmp/home
mkdir -p "$tmp/project"
# Two real runs give the exact on-disk format; the index is then grown to COUNT entries the
# way `create_run` would write it (one compact object per line).
python3 - "$tmp" "$count" <<'PY'
import json, os, sys, uuid, time, hashlib
tmp, count = sys.argv[1], int(sys.argv[2])
root = os.path.realpath(os.path.join(tmp, "project"))
pid = hashlib.sha256(root.encode()).hexdigest()[:16]
pdir = os.path.join(tmp, "home", "projects", pid)
os.makedirs(os.path.join(pdir, "runs"), exist_ok=True)
json.dump({"projectId": pid, "root": root, "createdAt": "2026-11-01T00:00:00Z"}, open(os.path.join(pdir, "project.json"), "w"))
phases = ["idle", "running", "waiting-user", "completed", "failed"]
nodes = ["step-01-select-story", "step-02-discover-inputs", "step-03-extract-context", "end-99"]
base = 1_790_000_000
lines = []
for i in range(count):
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + i * 60))
    lines.append(json.dumps({
        "runId": str(uuid.UUID(int=(((base + i * 60) * 1000) << 80) | (0x7 << 76) | (2 << 62) | i)),
        "projectId": pid, "packageId": "create-story-micro@1.0.0-c4b59698",
        "packageSha256": "c4b5969816f1ce852d418d5ca695ed0a5fb7112bac947906a277fe08617e6b77",
        "workflowRef": "create-story-micro", "activeAgentId": "sm", "phase": phases[i % 5],
        "createdAt": t, "lastUpdatedAt": t, "currentNodeId": nodes[i % 4]}, separators=(",", ":")))
open(os.path.join(pdir, "runsIndex.json"), "w").write("[\n" + ",\n".join(lines) + "\n]\n")
PY
ls -la "$BATON_HOME"/projects/*/runsIndex.json | awk '{print "index size: " $5 " bytes"}'
test "$("$bin" runs list --project "$tmp/project" | wc -l)" -eq $((count + 1)) || { echo "runs list did not print every run" >&2; exit 1; }
hyperfine --warmup 5 --runs 50 -N --export-json "$tmp/out.json" \
  -n baseline-version "$bin --version" \
  -n runs-list "$bin runs list --project $tmp/project" \
  -n runs-list-json "$bin runs list --project $tmp/project --json" \
  -n runs-list-all "$bin runs list" >/dev/null
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["baseline-version"]["median"]
print(f"{'command':<18}{'median ms':>10}{'p95 ms':>9}{'vs baseline':>13}")
for name, x in r.items():
    t = sorted(x["times"]); p95 = t[int(len(t) * 0.95) - 1]
    print(f"{name:<18}{x['median']*1000:>10.2f}{p95*1000:>9.2f}{x['median']/base:>12.2f}x")
PY
