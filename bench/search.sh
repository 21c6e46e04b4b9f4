#!/usr/bin/env bash
# fs.search (as the ToolHost runs it) against ripgrep with the same pattern and context, on
# (1) the cargo registry sources on this machine and (2) a generated tree of 100,000 files.
# Needs hyperfine and ripgrep (Debian: apt-get install hyperfine ripgrep).
# Usage: bench/search.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p baton-tools --example search_bench
bin=$PWD/target/release/examples/search_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
registry=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ | head -1)
python3 - "$tmp/tree" <<'PY'
import os, random, sys
root = sys.argv[1]
random.seed(7)
words = "alpha beta gamma delta state node edge graph story epic sprint agent tool mount".split()
for d in range(1000):
    dd = os.path.join(root, f"d{d:03}")
    os.makedirs(dd)
    for f in range(100):
        lines = [" ".join(random.choice(words) for _ in range(8)) for _ in range(20)]
        if (d * 100 + f) % 997 == 0:
            lines[5] = "needle_token found here"
        open(os.path.join(dd, f"f{f:02}.md"), "w").write("\n".join(lines) + "\n")
PY
echo "registry: $(find "$registry" -type f | wc -l) files, $(du -sh "$registry" | cut -f1); generated: $(find "$tmp/tree" -type f | wc -l) files"
run() {
  local name=$1 dir=$2 ours=$3 theirs=$4
  hyperfine -N --warmup 3 --runs 20 --export-json "$tmp/${name//[^a-z0-9]/_}.json" -n "fs.search" "$bin $dir '$ours'" -n "rg" "rg --no-config -n -C1 $theirs $dir" >/dev/null 2>&1 || true
  python3 - "$tmp/${name//[^a-z0-9]/_}.json" "$name" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
a, b = r["fs.search"]["median"], r["rg"]["median"]
print(f"{sys.argv[2]:<28} fs.search {a*1000:8.1f} ms   rg {b*1000:8.1f} ms   ratio {a/b:5.2f}x")
PY
}
run "registry literal" "$registry" RESOLVE_BENEATH RESOLVE_BENEATH
run "registry regex" "$registry" '/fn[[:space:]]+parse_[a-z]+/' "'fn[[:space:]]+parse_[a-z]+'"
run "100k files literal" "$tmp/tree" needle_token needle_token
run "100k files regex /i" "$tmp/tree" '/NEEDLE_TO[a-z]+/i' "-i 'NEEDLE_TO[a-z]+'"
