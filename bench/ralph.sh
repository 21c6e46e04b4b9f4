#!/usr/bin/env bash
# Whole-process wall time of `baton ralph next`, `complete` and `check --json` on a 30-step
# session, against `baton --version` (process start only) and `node -e ''` (the start-up every
# Node CLI pays, maestro's included) measured in the same run. The session lives on the disk
# (under target/), so the fsyncs of every write are real.
# Needs hyperfine (and node for the Node baseline). Usage: bench/ralph.sh [BATON_BIN=…]
set -euo pipefail
cd "$(dirname "$0")/.."
# BATON_BIN=path skips the build and times that binary.
if [ -z "${BATON_BIN:-}" ]; then cargo build --release --quiet -p baton; fi
bin=${BATON_BIN:-$PWD/target/release/baton}
mkdir -p target
tmp=$(mktemp -d -p "${BENCH_DIR:-$PWD/target}" ralph-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp/home
unset MAESTRO_HOME BATON_RALPH_CLI
mkdir -p "$HOME" "$tmp/project"
cp -r examples/skills/claude "$HOME/.claude"
cp -r examples/skills/maestro "$HOME/.maestro"
cd "$tmp/project"

# 18 steps from the stage table, 12 more from the post-test fix loop: 30 steps, 10 of them gates.
"$bin" ralph new "add CSV export" --phase 1 --milestone M1 \
  --chain brainstorm,init,analyze,plan,execute,verify,business-test,review,test-gen,test,milestone-audit,goal-audit,milestone-complete >/dev/null
"$bin" ralph insert --after 0 --template post-test --gap "flaky export" >/dev/null
dir=$(ls -d "$PWD"/.workflow/.maestro/ralph-*)
steps=$("$bin" ralph status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["steps"]))')
[ "$steps" = 30 ] || { echo "expected 30 steps, got $steps" >&2; exit 1; }
cp "$dir/status.json" "$tmp/fresh.json"
"$bin" ralph next >/dev/null
cp "$dir/status.json" "$tmp/claimed.json"
cp "$tmp/fresh.json" "$dir/status.json"
echo "session: $dir/status.json ($(wc -c <"$tmp/fresh.json") bytes, $steps steps)"

fresh="cp $tmp/fresh.json $dir/status.json"
# hyperfine pairs the n-th --prepare with the n-th command.
args=(-n baseline-version --prepare true "$bin --version")
if command -v node >/dev/null; then args+=(-n baseline-node --prepare true "node -e ''"); fi
args+=(-n next --prepare "$fresh" "$bin ralph next")
args+=(-n complete --prepare "cp $tmp/claimed.json $dir/status.json" "$bin ralph complete 0 --status DONE")
args+=(-n "check --json" --prepare "$fresh" "$bin ralph check --json")
args+=(-n status --prepare "$fresh" "$bin ralph status")
names=() prepares=() commands=()
for ((i = 0; i < ${#args[@]}; i += 5)); do
  names+=(-n "${args[i+1]}") prepares+=(--prepare "${args[i+3]}") commands+=("${args[i+4]}")
done
hyperfine --warmup 20 --runs 300 -N --export-json "$tmp/out.json" \
  "${prepares[@]}" "${names[@]}" "${commands[@]}" >/dev/null
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
# The floor of any durable write of this file on this disk: temp file, write, fsync, rename,
# fsync of the directory (what every changing verb does once), in the same folder.
python3 - "$tmp/fresh.json" "$dir" <<'PY'
import os, statistics, sys, time
data = open(sys.argv[1], "rb").read()
d = sys.argv[2]
times = []
for _ in range(100):
    t = time.perf_counter()
    fd = os.open(f"{d}/.probe", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.rename(f"{d}/.probe", f"{d}/probe.json")
    dfd = os.open(d, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    times.append(time.perf_counter() - t)
print(f"{'durable write':<18}{statistics.median(times)*1000:>10.2f}   (temp + fsync + rename + fsync dir, no process)")
PY
