#!/usr/bin/env bash
# bench/bmad_versions.sh — what `baton epic` runs on a real BMAD install of each version: installs
# bmad-method from npm into a temp dir (one project per version, the bmm module for Claude Code),
# adds a two-story sprint-status.yaml, and prints `baton epic run epic-1 --dry-run` of each: the
# pipeline, why, and what runs each phase.
#
#   bench/bmad_versions.sh                          # 6.12.0 and 6.10.0
#   VERSIONS="6.12.0 6.8.0" bench/bmad_versions.sh  # other releases
#   BATON=path/to/baton bench/bmad_versions.sh      # this binary (default: cargo build -p baton)
#   KEEP=1 bench/bmad_versions.sh                   # keep the installed projects
#
# Needs node/npx with access to the npm registry. No model is asked anything (a dry run).
# NOT part of the test suite.
set -euo pipefail

VERSIONS=${VERSIONS:-"6.12.0 6.10.0"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
[[ -n "${KEEP:-}" ]] && echo "keeping $work" >&2

if [[ -z "${BATON:-}" ]]; then
  cargo build -q -p baton --manifest-path "$ROOT/Cargo.toml"
  BATON="$ROOT/target/debug/baton"
fi

for version in $VERSIONS; do
  proj="$work/bmad-$version"
  mkdir -p "$proj"
  echo "installing bmad-method@$version (bmm, claude-code)…" >&2
  # 6.10 needs --output-folder, or it writes a literal `{output_folder}/` folder.
  if ! (cd "$work" && npx -y "bmad-method@$version" install --directory "$proj" --modules bmm \
    --tools claude-code --output-folder _bmad-output --yes) >"$work/install-$version.log" 2>&1; then
    echo "the install of $version failed:" >&2
    tail -20 "$work/install-$version.log" >&2
    exit 1
  fi
  artifacts="$proj/_bmad-output/implementation-artifacts"
  mkdir -p "$artifacts"
  cat >"$artifacts/sprint-status.yaml" <<'YAML'
project: harbor
tracking_system: file-system

development_status:
  epic-1: in-progress
  1-1-tide-table: backlog
  1-2-mooring-map: ready-for-dev
  epic-1-retrospective: optional
YAML
  echo "== bmad-method $version: baton epic run epic-1 --dry-run"
  # The dry run needs no model; the note that none was checked goes to stderr.
  env -u BATON_MODEL -u OPENAI_API_KEY BATON_HOME="$work/home" \
    "$BATON" epic run epic-1 -p "$proj" --dry-run 2>/dev/null |
    sed -e '/^phases:/,$d'
  echo
done
