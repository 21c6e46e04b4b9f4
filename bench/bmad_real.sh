#!/usr/bin/env bash
# bench/bmad_real.sh — baton epic on a real BMAD 6.12 install.
#
# NOT part of the test suite: it needs the npm registry (it installs bmad-method@6.12.0 with npm)
# and node >= 20. Everything happens in a temporary directory, which is removed at the end
# (set KEEP=1 to keep it). No model is called: only `baton epic status` and `--dry-run`.
#
#   bench/bmad_real.sh                 # uses target/debug/baton (build it first)
#   BATON=path/to/baton bench/bmad_real.sh
#   BMAD_VERSION=6.12.0 KEEP=1 bench/bmad_real.sh
#
# What it does:
#   1. `npm install bmad-method@$BMAD_VERSION` into a scratch folder, then runs BMAD's own
#      installer non-interactively (`bmad-method install --yes --modules bmm --tools claude-code
#      --shims --directory <project>`), so the project has what a user's has: `_bmad/config.toml`
#      (+ `config.user.toml`, `custom/`), `_bmad/bmm/config.yaml`, `.claude/skills/bmad-*/`.
#   2. The installer writes no sprint-status.yaml (sprint planning is a skill the user runs), so
#      the script adds one: with `uv` (or a python with ruamel.yaml, BMAD_PYTHON) it is
#      produced by BMAD's own `bmad-sprint-planning/scripts/sprint_plan.py generate` from a
#      small epics.md; otherwise the same bytes are written from a copy. One story is given a 6.12 `bmad-build`
#      spec (`spec-{key}.md` with frontmatter `status: in-progress`), as `bmad-build` leaves it.
#   3. Prints `baton epic status`, `baton epic status --json` and
#      `baton epic run epic-1 --dry-run` on that project.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BATON=${BATON:-$ROOT/target/debug/baton}
BMAD_VERSION=${BMAD_VERSION:-6.12.0}
[ -x "$BATON" ] || { echo "no baton binary at $BATON (cargo build -p baton, or set BATON=)" >&2; exit 2; }
command -v npm >/dev/null || { echo "npm is needed (this bench installs BMAD from the npm registry)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bmad-real.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
NPMDIR=$WORK/npm
PROJ=$WORK/project
mkdir -p "$NPMDIR" "$PROJ"

echo "== installing bmad-method@$BMAD_VERSION (npm) into $WORK"
(cd "$NPMDIR" && npm init -y >/dev/null && npm install --no-audit --no-fund "bmad-method@$BMAD_VERSION" >npm.log 2>&1) \
  || { echo "npm install failed:" >&2; tail -20 "$NPMDIR/npm.log" >&2; exit 1; }
(cd "$NPMDIR" && npx --no-install bmad-method install --directory "$PROJ" --modules bmm \
  --tools claude-code --shims --yes </dev/null >install.log 2>&1) \
  || { echo "bmad-method install failed:" >&2; tail -30 "$NPMDIR/install.log" >&2; exit 1; }

echo "== installed layout (depth 3, skills folders collapsed)"
(cd "$PROJ" && find . -maxdepth 3 -not -path './.claude/skills/*/*' | sort | sed 's|^\./||' | grep -v '^\.$')
echo "-- _bmad/config.toml [modules.bmm]:"
sed -n '/^\[modules.bmm\]/,/^$/p' "$PROJ/_bmad/config.toml"

ART=$PROJ/_bmad-output/implementation-artifacts
PLAN=$PROJ/_bmad-output/planning-artifacts
mkdir -p "$ART" "$PLAN"
cat >"$PLAN/epics.md" <<'EOF'
# Bench Project - Epic Breakdown

## Epic 1: Greeting service

### Story 1.1: Hello endpoint
As a user I want GET /hello to answer "hello" so that I can check the service.

### Story 1.2: Greeting by name
As a user I want GET /hello/{name} to greet me by name.

### Story 1.3: Greeting log
As an operator I want every greeting logged with its time.

## Epic 2: Packaging

### Story 2.1: Container image
As an operator I want a container image of the service.
EOF

SPRINT_PLAN=$PROJ/.claude/skills/bmad-sprint-planning/scripts/sprint_plan.py
# BMAD runs its scripts with `uv run` (ruamel.yaml as an inline dependency); a python with
# ruamel.yaml (BMAD_PYTHON) does as well.
BMAD_PYTHON=${BMAD_PYTHON:-python3}
if command -v uv >/dev/null; then PLAN_RUN=(uv run --quiet "$SPRINT_PLAN")
elif "$BMAD_PYTHON" -c 'import ruamel.yaml' 2>/dev/null; then PLAN_RUN=("$BMAD_PYTHON" "$SPRINT_PLAN")
else PLAN_RUN=(); fi
if [ ${#PLAN_RUN[@]} -gt 0 ] && [ -f "$SPRINT_PLAN" ]; then
  echo "== sprint-status.yaml from BMAD's own sprint_plan.py generate (${PLAN_RUN[0]})"
  "${PLAN_RUN[@]}" generate --epic-file "$PLAN/epics.md" \
    --status-file "$ART/sprint-status.yaml" --stories-dir "$ART" --project "Bench Project" \
    --date "11-25-2026 12:00" --story-location "_bmad-output/implementation-artifacts" \
    --set 1-1-hello-endpoint=done --set 1-2-greeting-by-name=in-progress --set epic-1=in-progress \
    >/dev/null || { echo "sprint_plan.py generate failed" >&2; exit 1; }
else
  # Byte for byte what sprint_plan.py 6.12 generates from the epics.md above with those --set.
  echo "== sprint-status.yaml as BMAD 6.12's sprint_plan.py writes it (no uv, no ruamel.yaml here)"
  cat >"$ART/sprint-status.yaml" <<'EOF'
# STATUS DEFINITIONS:
# ==================
# Epic Status:
#   - backlog: Epic not yet started
#   - in-progress: Epic actively being worked on
#   - done: All stories in epic completed

# Story Status:
#   - backlog: Story only exists in epic file
#   - ready-for-dev: Story file created, ready for development
#   - in-progress: Developer actively working on implementation
#   - review: Implementation complete, ready for review
#   - done: Story completed

# Retrospective Status:
#   - optional: Can be completed but not required
#   - done: Retrospective has been completed

# Action Item Status:
#   - open: Committed during a retrospective, not yet addressed
#   - in-progress: Actively being worked on
#   - done: Completed

# WORKFLOW NOTES:
# ===============
# - Epic transitions to 'in-progress' automatically when its first story starts (via build's sprint sync)
# - Stories can be worked in parallel if team capacity allows
# - Developer typically creates the next story after the previous one is 'done' to incorporate learnings
# - Dev moves story to 'review', then runs code-review (fresh context, different LLM recommended)
# - Retrospective appends its action items to action_items; the status view surfaces open ones
generated: 11-25-2026 12:00
last_updated: 11-25-2026 12:00
project: Bench Project
project_key: NOKEY
tracking_system: file-system
story_location: _bmad-output/implementation-artifacts
development_status:
  epic-1: in-progress
  1-1-hello-endpoint: done
  1-2-greeting-by-name: in-progress
  1-3-greeting-log: backlog
  epic-1-retrospective: optional

  epic-2: backlog
  2-1-container-image: backlog
  epic-2-retrospective: optional
EOF
fi
# What bmad-build leaves for a story it is working on: spec-{slug}.md led by the story key,
# frontmatter status (draft | ready-for-dev | in-progress | in-review | done | blocked).
cat >"$ART/spec-1-2-greeting-by-name.md" <<'EOF'
---
title: 'Greeting by name'
type: 'feature'
created: '2026-11-25'
status: 'in-progress'
---

<intent-contract>

## Intent

GET /hello/{name} answers "hello, {name}".

</intent-contract>
EOF
echo "-- $(basename "$ART")/sprint-status.yaml:"
cat "$ART/sprint-status.yaml"

run() {
  echo
  echo "== baton $*"
  (cd "$PROJ" && env -u OPENAI_BASE_URL -u OPENAI_API_KEY -u BATON_MODEL "$BATON" "$@" --project . --color never)
  echo "(exit $?)"
}
run epic status
run epic status --json
run epic run epic-1 --dry-run
if [ ${#PLAN_RUN[@]} -gt 0 ]; then
  echo
  echo "== BMAD's own check: sprint_plan.py validate"
  "${PLAN_RUN[@]}" validate --status-file "$ART/sprint-status.yaml"
fi
