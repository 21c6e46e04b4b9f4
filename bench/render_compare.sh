#!/usr/bin/env bash
# bench/render_compare.sh — baton's rendering of BMAD's rendered skills, compared file by file
# with BMAD's own `_bmad/scripts/render_skill.py`, on a real install from npm.
#
#   bench/render_compare.sh                       # bmad-method 6.12.0
#   VERSION=6.10.0 bench/render_compare.sh        # another release
#   BATON=path/to/baton bench/render_compare.sh   # this binary (default: cargo build -p baton)
#   KEEP=1 bench/render_compare.sh                # keep the temp dir (both renderings, the diffs)
#   NO_TEAM_LAYER=1 bench/render_compare.sh       # the skills' defaults only (by default a team
#                                                 # layer _bmad/custom/<skill>.toml is written)
#
# Needs node/npx with access to the npm registry (the install), and `uv` on PATH for BMAD's
# renderer: without uv it says so and exits 0 (baton renders alone; there is nothing to compare
# with). NOT part of the test suite.
#
# What is compared: for every installed skill whose SKILL.md hands over to render_skill.py, the
# Markdown files BMAD's script writes into its generation folder (_bmad/render/<skill>/…, its
# manifest.json aside) against the same files written by `baton validate <skill> --out DIR`.
# Paths differ by design and are normalised on BMAD's side before comparing: the generation
# folder is `@pkg`, the project is `@project` (absolute, or a `{project-root}` left in the text),
# `{skill-root}` is `@pkg`. Files baton places beside them (customize.toml and other non-Markdown
# files of the skill, for the run to read) are listed, not compared.
set -euo pipefail

VERSION=${VERSION:-6.12.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
[[ -n "${KEEP:-}" ]] && echo "keeping $work" >&2

if [[ -z "${BATON:-}" ]]; then
  cargo build -q -p baton --manifest-path "$ROOT/Cargo.toml"
  BATON="$ROOT/target/debug/baton"
fi

proj="$work/project"
mkdir -p "$proj"
echo "installing bmad-method@$VERSION (bmm, claude-code) into a temp dir…" >&2
if ! (cd "$work" && npx -y "bmad-method@$VERSION" install --directory "$proj" --modules bmm \
  --tools claude-code --output-folder _bmad-output --yes) >"$work/install.log" 2>&1; then
  echo "the install failed:" >&2
  tail -20 "$work/install.log" >&2
  exit 1
fi

# A team layer over every skill's defaults, so that the customization is compared too: facts
# (one of two lines), an on_complete, one review layer switched off and one added with a `when`.
mkdir -p "$proj/_bmad/custom"
team_layer() {
  cat <<'TOML'
[workflow]
persistent_facts = ["Every change ships with a test.", "Migrations are reviewed twice:\nonce for data, once for locks."]
on_complete = "Post the spec path in #delivery."

[[workflow.review_layers]]
id = "edge-case-hunter"
instruction = ""

[[workflow.review_layers]]
id = "security-pass"
name = "Security Pass"
when = "the diff touches authentication"
instruction = "Read {skill-root}/review-prompts/verification-gap.md, then look for secrets in `{diff_file}`."
TOML
}

skills=()
for dir in "$proj"/.claude/skills/*/; do
  dir=${dir%/}
  if [[ -f "$dir/workflow.md" ]] && grep -q render_skill.py "$dir/SKILL.md" 2>/dev/null; then
    skills+=("$dir")
    [[ -n "${NO_TEAM_LAYER:-}" ]] || team_layer >"$proj/_bmad/custom/$(basename "$dir").toml"
  fi
done
echo "bmad-method@$VERSION: ${#skills[@]} rendered skills: $(for s in "${skills[@]}"; do basename "$s"; done | tr '\n' ' ')"

# baton's rendering of each (done whether or not uv is here: a skill baton cannot render is a finding).
export BATON_HOME="$work/baton-home"
for s in "${skills[@]}"; do
  name=$(basename "$s")
  if ! "$BATON" validate "$s" --out "$work/baton/$name" >"$work/baton-$name.log" 2>&1; then
    echo "  $name: baton refuses it:" && sed 's/^/    /' "$work/baton-$name.log"
  fi
done

if ! command -v uv >/dev/null 2>&1; then
  echo "uv is not on PATH: BMAD's render_skill.py cannot run here, nothing to compare (baton's rendering alone was checked)"
  exit 0
fi
if [[ ! -f "$proj/_bmad/scripts/render_skill.py" ]]; then
  echo "this install has no _bmad/scripts/render_skill.py: nothing to compare"
  exit 0
fi

total_same=0
total_diff=0
for s in "${skills[@]}"; do
  name=$(basename "$s")
  printed=$(uv run --no-cache "$proj/_bmad/scripts/render_skill.py" --project-root "$proj" --skill "$s" 2>"$work/uv-$name.log" || true)
  entry=${printed#read and follow }
  if [[ "$printed" != "read and follow "* || ! -f "$entry" ]]; then
    echo "  $name: BMAD's script did not render it: $printed $(tail -1 "$work/uv-$name.log")"
    continue
  fi
  gen=$(dirname "$entry")
  mkdir -p "$work/bmad/$name"
  (cd "$gen" && find . -type f ! -name manifest.json | sed 's|^\./||' | sort) >"$work/files-$name"
  same=0
  differ=()
  while IFS= read -r f; do
    mkdir -p "$(dirname "$work/bmad/$name/$f")"
    # BMAD's absolute paths and placeholders as baton writes them.
    sed -e "s|$gen/|@pkg/|g" -e "s|$gen|@pkg|g" -e "s|$proj/|@project/|g" -e "s|$proj|@project|g" \
      -e 's|{project-root}|@project|g' -e 's|{skill-root}|@pkg|g' -e "s|{skill-name}|$name|g" \
      "$gen/$f" >"$work/bmad/$name/$f"
    if [[ ! -f "$work/baton/$name/$f" ]]; then
      differ+=("$f (baton has no such file)")
    elif cmp -s "$work/bmad/$name/$f" "$work/baton/$name/$f"; then
      same=$((same + 1))
    else
      differ+=("$f")
      diff -u --label "bmad/$f" --label "baton/$f" "$work/bmad/$name/$f" "$work/baton/$name/$f" \
        >>"$work/diff-$name.txt" || true
    fi
  done <"$work/files-$name"
  extra=$(cd "$work/baton/$name" 2>/dev/null && find . -type f | sed 's|^\./||' | sort \
    | comm -23 - "$work/files-$name" | tr '\n' ' ')
  n=$(wc -l <"$work/files-$name")
  total_same=$((total_same + same))
  total_diff=$((total_diff + ${#differ[@]}))
  if [[ ${#differ[@]} -eq 0 ]]; then
    echo "  $name: identical, $same of $n files"
  else
    echo "  $name: $same of $n files identical; differ: ${differ[*]}"
    sed 's/^/      /' "$work/diff-$name.txt" | head -60
  fi
  [[ -n "$extra" ]] && echo "      (baton also places, not compared: $extra)"
done
echo "total: $total_same files identical, $total_diff differ"
