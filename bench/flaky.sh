#!/usr/bin/env bash
# Runs the browser tests (and any other test targets named) N times in a row on a loaded
# machine and counts passes and failures per test binary (docs/RELIABILITY.md, "Flaky tests").
# A test that depends on timing or on a race shows up here long before CI meets it.
#
# The load: a `cargo build` of a scratch copy of the workspace in its own target directory,
# started again each time it finishes (`build`, the default), busy loops on every core
# (`spin`), both (`both`) or nothing (`none`).
#
# Usage: bench/flaky.sh [-n N] [--load build|spin|both|none] [PACKAGE:TARGET[:MODULE]]...
#   -n N           runs of each test group (default 30)
#   PACKAGE:TARGET[:MODULE]
#                  more integration tests: a test target, or one module (one file) of it,
#                  e.g. baton:e2e:cli_runs baton-tools:terminal
#                  (always run: every test file that drives Chromium, i.e. that calls
#                  `chromium_or_skip`: baton-testkit:cdp, baton-serve:serve:pages,
#                  baton:e2e:serve_browser, baton:e2e:serve_browser_pages, ...)
# Exit status: 0 when every run of every group passed, 1 otherwise. Logs of failed runs go
# to target/flaky/.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=30
load=build
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *:*) targets+=("$1"); shift ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$runs" in ''|*[!0-9]*) echo "error: -n wants a number, got $runs" >&2; exit 2 ;; esac
case "$load" in build|spin|both|none) ;; *) echo "error: --load build|spin|both|none" >&2; exit 2 ;; esac
# The browser tests: every integration test target whose source drives Chromium.
# A test target is one file, or a root file whose `mod NAME;` lines make each file beside it
# a module: a browser test is a target, or a module of one, whose file calls chromium_or_skip.
browser_targets=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, os, re, sys
for package in json.load(sys.stdin)["packages"]:
    for target in package["targets"]:
        if target["kind"] != ["test"]:
            continue
        root = target["src_path"]
        text = open(root).read()
        name = package["name"] + ":" + target["name"]
        if "chromium_or_skip" in text:
            print(name)
        for module in re.findall(r"^mod ([a-z_0-9]+);", text, re.M):
            path = os.path.join(os.path.dirname(root), module + ".rs")
            if os.path.exists(path) and "chromium_or_skip" in open(path).read():
                print(name + ":" + module)
')
# shellcheck disable=SC2206 # one PACKAGE:TEST per word
targets=($browser_targets ${targets[@]+"${targets[@]}"})

# The browser tests must run, never skip.
export BATON_REQUIRE_BROWSER=1
logs=${CARGO_TARGET_DIR:-$PWD/target}/flaky
mkdir -p "$logs"
scratch=$(mktemp -d)
loaders=()
cleanup() {
  for pid in "${loaders[@]}"; do
    # Each loader leads its own process group (set -m below): end it with its children.
    kill -- "-$pid" 2>/dev/null || true
  done
  for pid in "${loaders[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Build the test binaries first (not under the extra load), and find them.
args=()
for t in "${targets[@]}"; do
  IFS=: read -r package target _ <<<"$t"
  args+=(-p "$package" --test "$target")
done
echo "== building ${targets[*]}"
cargo test --locked --no-run --message-format=json "${args[@]}" >"$scratch/build.json"
binaries=()
while IFS=$'\t' read -r name exe dir; do
  binaries+=("$name"$'\t'"$exe"$'\t'"$dir")
done < <(python3 - "$scratch/build.json" "${targets[@]}" <<'EOF'
import json, os, sys
wanted = {}
for t in sys.argv[2:]:
    package, target, *module = t.split(":")
    wanted.setdefault(f"{package}:{target}", []).append(t)
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if "test" not in m["target"]["kind"]:
        continue
    # path+file:///…/crates/baton-serve#0.1.0, or …#other-name@0.1.0
    where, _, version = m["package_id"].partition("#")
    package = version.split("@")[0] if "@" in version else where.rstrip("/").rsplit("/", 1)[-1]
    key = f"{package}:{m['target']['name']}"
    for t in wanted.pop(key, []):
        print(f"{t}\t{m['executable']}\t{os.path.dirname(m['manifest_path'])}")
EOF
)
if [ "${#binaries[@]}" -ne "${#targets[@]}" ]; then
  echo "error: found test binaries for ${#binaries[@]} of ${#targets[@]} targets" >&2
  exit 2
fi

set -m
start_build_load() {
  echo "== load: cargo build of a scratch copy (its own target directory), again and again"
  mkdir -p "$scratch/src"
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$scratch/src"
  else
    tar --exclude=./target -cf - . | tar -xf - -C "$scratch/src"
  fi
  (
    cd "$scratch/src"
    while true; do
      cargo build --workspace --locked --offline -j "$(nproc)" --target-dir "$scratch/target" \
        >/dev/null 2>&1 || cargo build --workspace --locked -j "$(nproc)" \
        --target-dir "$scratch/target" >/dev/null 2>&1 || true
      rm -rf "$scratch/target"
    done
  ) &
  loaders+=($!)
}
start_spin_load() {
  echo "== load: a busy loop on each of $(nproc) cores"
  for _ in $(seq 1 "$(nproc)"); do
    ( while :; do :; done ) &
    loaders+=($!)
  done
}
case "$load" in
  build) start_build_load ;;
  spin) start_spin_load ;;
  both) start_build_load; start_spin_load ;;
  none) ;;
esac
set +m

declare -A passed failed
started=$SECONDS
for i in $(seq 1 "$runs"); do
  line="run $i/$runs:"
  for entry in "${binaries[@]}"; do
    IFS=$'\t' read -r name exe dir <<<"$entry"
    IFS=: read -r _ _ module <<<"$name"
    filter=()
    [ -z "$module" ] || filter=("$module::")
    log="$scratch/run.log"
    # As cargo runs it: from its package's directory. A hang counts as a failure.
    if (cd "$dir" && timeout 1200 "$exe" ${filter[@]+"${filter[@]}"} >"$log" 2>&1); then
      passed[$name]=$(( ${passed[$name]:-0} + 1 ))
      line+=" $name ok"
    else
      failed[$name]=$(( ${failed[$name]:-0} + 1 ))
      cp "$log" "$logs/${name//:/-}.run$i.log"
      line+=" $name FAILED ($(grep -E '^test .* FAILED$' "$log" | sed 's/^test //; s/ \.\.\. FAILED$//' | paste -sd, - || true))"
    fi
  done
  echo "$line  [$(( SECONDS - started )) s, load $(cut -d' ' -f1 /proc/loadavg)]"
done

echo
printf '%-36s %6s %6s\n' "tests" passed failed
status=0
for entry in "${binaries[@]}"; do
  IFS=$'\t' read -r name _ _ <<<"$entry"
  printf '%-36s %6d %6d\n' "$name" "${passed[$name]:-0}" "${failed[$name]:-0}"
  [ "${failed[$name]:-0}" -eq 0 ] || status=1
done
echo "$runs runs in $(( SECONDS - started )) s under load '$load'"
[ "$status" -eq 0 ] || echo "logs of the failed runs: $logs/"
exit "$status"
