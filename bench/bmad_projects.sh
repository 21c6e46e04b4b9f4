#!/usr/bin/env bash
# bench/bmad_projects.sh — how many real BMAD projects `baton epic` reads right, found without
# any configuration.
#
#   bench/bmad_projects.sh [SURVEY_DIR]          # default SURVEY_DIR=/work/survey
#   BATON=path/to/baton bench/bmad_projects.sh   # use this binary (default: cargo build --release -p baton)
#   ONLY="fledgely docvet" KEEP=1 bench/bmad_projects.sh
#   WITH_CONFIG=1 bench/bmad_projects.sh         # each copy gets a one-line baton.toml naming the
#                                                # folder of the expected sprint-status (read right
#                                                # once told where the file is)
#
# NOT part of the test suite, and the projects are NOT in this repository: they are third-party
# files (public GitHub projects that use BMAD), laid out outside the repository, never committed.
# Layout expected under SURVEY_DIR:
#   projects/<name>/          one project at one commit: its BMAD config files (_bmad/config.toml
#                             and its config.user.toml / custom/*.toml layers, _bmad/bmm/config.yaml,
#                             .bmad/bmm/config.yaml or bmad/bmm/config.yaml, whichever it has), its
#                             sprint-status file(s) with their real contents at their real paths, and
#                             its story/spec .md files under the artifacts/stories folders with their
#                             real names (real contents, or at least the Status line / frontmatter).
#                             No baton.toml. A file SOURCE says which repository and commit.
#   expected/<name>.json      the truth, written by hand from the project's files, independent of
#                             what baton does: {"generation", "sprintStatus" (path that should be
#                             found), "foundBy", "expectRefusal" (when the right reading is a refusal),
#                             "yamlErrorLine" (file is not valid YAML: a tolerant read or a refusal
#                             naming that line are both right), "keys": {"epics","stories","retros"}
#                             (keys BMAD 6.12's grammar accepts), "unrecognized": [{"key","status","line"}],
#                             "notRunnable": [{"key","status","line","kind"}] (grammatical keys whose
#                             status no BMAD generation defines), "held": stories of a notRunnable epic,
#                             "stories": [{"key","status","epic","file","alsoOk","ambiguousOk"}] (every
#                             story a loop would act on, and where its file really is, or null),
#                             "epicsToRun": [N…]}.
#
# For each project: a copy in a temp dir, HOME and BATON_HOME in temp dirs, no API key, offline;
# runs `baton epic status --json`, `baton epic status`, and `baton epic run epic-N --dry-run --json
# --non-interactive` for every epic N; checks the copy is unchanged; then compares with the expected
# file and prints one line per project and the totals. Raw outputs are kept in
# SURVEY_DIR/runs/<time>/ (OUT= to choose). When baton reports no story file per story (before the
# real-BMAD work), the comparer takes baton's lookup of that time, {artifacts}/{key}.md, and marks
# the column with '*'.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SURVEY=${1:-/work/survey}
[ -d "$SURVEY/projects" ] && [ -d "$SURVEY/expected" ] \
  || { echo "no projects/ and expected/ under $SURVEY (see the top of $0 for the layout)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed (the comparer)" >&2; exit 2; }
if [ -z "${BATON:-}" ]; then
  (cd "$ROOT" && cargo build --release --quiet -p baton) || exit 1
  BATON=$ROOT/target/release/baton
  BUILT="built from $ROOT at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- crates 2>/dev/null || echo ' + uncommitted changes')"
else
  BUILT="given"
fi
[ -x "$BATON" ] || { echo "no baton binary at $BATON" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bmad-projects.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
OUT=${OUT:-$SURVEY/runs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" "$WORK/home" "$WORK/baton-home"
VERSION=$("$BATON" --version 2>/dev/null | head -1)
echo "baton: $BATON ($VERSION, $BUILT)$([ "${WITH_CONFIG:-0}" = 1 ] && echo '; WITH_CONFIG=1: a one-line baton.toml in each project')" \
  | tee "$OUT/baton.txt"

# Only what a user's shell would hand it: no API key, no baton/model settings from this shell.
run() { env -i PATH="$PATH" HOME="$WORK/home" BATON_HOME="$WORK/baton-home" NO_COLOR=1 \
  LANG=C.UTF-8 TMPDIR="$WORK" "$BATON" "$@"; }
snapshot() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha1sum); }

names=()
for exp in "$SURVEY"/expected/*.json; do
  name=$(basename "$exp" .json)
  [ -d "$SURVEY/projects/$name" ] || { echo "skip $name: no projects/$name" >&2; continue; }
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  names+=("$name")
  o=$OUT/$name; copy=$WORK/p/$name
  mkdir -p "$o" "$WORK/p"
  cp -a "$SURVEY/projects/$name" "$copy" && rm -f "$copy/SOURCE"
  if [ "${WITH_CONFIG:-0}" = 1 ]; then
    dir=$(python3 -c 'import json,os,sys; print(os.path.dirname(json.load(open(sys.argv[1]))["sprintStatus"]))' "$exp")
    printf '[autopilot]\nimplementation_artifacts = "%s"\n' "$dir" >"$copy/baton.toml"
  fi
  snapshot "$copy" >"$o/before.sha"
  (cd "$copy" && run epic status --json -p . >"$o/status.json" 2>"$o/status.err"; echo $? >"$o/status.rc")
  (cd "$copy" && run epic status -p . >"$o/status.txt" 2>&1)
  for n in $(python3 -c 'import json,sys; print(*json.load(open(sys.argv[1]))["epicsToRun"])' "$exp"); do
    (cd "$copy" && run epic run "epic-$n" --dry-run --json --non-interactive -p . \
      >"$o/dry-epic-$n.json" 2>"$o/dry-epic-$n.err"; echo $? >"$o/dry-epic-$n.rc")
  done
  snapshot "$copy" >"$o/after.sha"
  cmp -s "$o/before.sha" "$o/after.sha" || diff "$o/before.sha" "$o/after.sha" >"$o/wrote.txt"
  rm -rf "$copy"
done
[ ${#names[@]} -gt 0 ] || { echo "no project to run" >&2; exit 2; }

python3 - "$SURVEY" "$OUT" "${WITH_CONFIG:-0}" "${names[@]}" <<'PY' | tee "$OUT/report.txt"
import json, os, re, sys
survey, out, with_config, names = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
FOUND = "found with baton.toml (rule)" if with_config else "found w/o config (rule)"
FILE_FIELDS = ("storyFile", "story_file", "file", "storyPath", "path")
LIST_FIELDS = ("candidates", "ambiguous", "storyFiles", "files", "matches")
MARKERS = ("reason", "note", "ask", "question", "notRunnable", "held", "blocked", "skip", "skipped", "problem")

def load(p):
    try:
        with open(p, encoding="utf-8") as f: return json.load(f)
    except Exception: return None

def norm(p):
    if not isinstance(p, str) or not p: return None
    p = p.replace("\\", "/")
    m = re.search(r"/p/[^/]+/(.*)$", p)          # an absolute path into the temp copy
    if p.startswith("/") and m: p = m.group(1)
    while p.startswith("./"): p = p[2:]
    return p.rstrip("/")

def keys_of(items):
    out = set()
    for it in items or []:
        if isinstance(it, dict) and isinstance(it.get("key") or it.get("storyKey"), str):
            out.add(it.get("key") or it.get("storyKey"))
        elif isinstance(it, str): out.add(it)
    return out

def find_lists(doc, names):
    """Lists under one of these names, at the top level or one level down (not inside the board)."""
    found = []
    if not isinstance(doc, dict): return found
    for k, v in doc.items():
        if k in names and isinstance(v, list): found += v
        elif isinstance(v, dict) and k != "epics":
            for k2, v2 in v.items():
                if k2 in names and isinstance(v2, list): found += v2
    return found

def board(doc):
    keys, files, has_file = {}, {}, False
    entries = {}
    def walk(x):
        nonlocal has_file
        if isinstance(x, dict):
            k = x.get("key")
            if isinstance(k, str): keys[k] = x.get("status"); entries[k] = x
            for f in FILE_FIELDS:
                if f in x and isinstance(k, str):
                    has_file = True; files[k] = x[f]
            for v in x.values(): walk(v)
        elif isinstance(x, list):
            for v in x: walk(v)
    walk(doc.get("epics", []))
    return keys, files, has_file, entries

def reported_ss(doc):
    """(path, rule, inferred) of the sprint-status file baton says it read (top level or one level down)."""
    rule = path = None
    places = [doc] + [v for k, v in doc.items() if isinstance(v, dict) and k not in ("epics", "error")]
    for d in places:
        for k, v in d.items():
            if rule is None and re.search(r"rule|foundBy|found_by", k, re.I) and isinstance(v, str): rule = v
            if path is None and re.search(r"sprint.?status", k, re.I):
                if isinstance(v, str): path = v
                elif isinstance(v, dict):
                    path = v.get("path") or v.get("file")
                    for kk, vv in v.items():
                        if rule is None and re.search(r"rule|found|source|how", kk, re.I) and isinstance(vv, str): rule = vv
    if isinstance(path, str): return norm(path), rule, False
    art = doc.get("implementationArtifacts")
    if isinstance(art, dict): art = art.get("path") or art.get("folder")
    if isinstance(art, str): return norm(art + "/sprint-status.yaml"), rule or f"artifacts {norm(art)}", True
    return None, rule, True

def strings(x):
    if isinstance(x, str): yield x
    elif isinstance(x, dict):
        for v in x.values(): yield from strings(v)
    elif isinstance(x, list):
        for v in x: yield from strings(v)

def entry_file(entry, proj):
    """The story file a plan/board entry names: a path, a list (ambiguity), or None."""
    for f in LIST_FIELDS:
        v = entry.get(f)
        if isinstance(v, list) and len(v) > 1:
            return sorted(norm(x if isinstance(x, str) else (x or {}).get("path")) or "" for x in v)
    for f in FILE_FIELDS:
        if f in entry:
            p = entry[f]
            if isinstance(p, dict): p = p.get("path") or p.get("file")
            p = norm(p)
            return p if p and os.path.isfile(os.path.join(proj, p)) else None
    return "<absent>"

rows, details, gen_tot = [], [], {}
for name in names:
    exp = load(f"{survey}/expected/{name}.json")
    proj = f"{survey}/projects/{name}"
    o = f"{out}/{name}"
    st = load(f"{o}/status.json") or {}
    rc = (open(f"{o}/status.rc").read().strip() if os.path.exists(f"{o}/status.rc") else "?")
    probs = []
    wrote = os.path.exists(f"{o}/wrote.txt")
    if wrote: probs.append("baton changed files in the project copy (see wrote.txt)")
    gen = exp["generation"]
    err = st.get("error") if isinstance(st.get("error"), dict) else None
    errtext = json.dumps(err, ensure_ascii=False) if err else ""
    want = exp["sprintStatus"]
    found = rulecol = None
    read = False
    if exp.get("expectRefusal"):
        found = bool(err) and err.get("code") != "SPRINT_STATUS_MISSING" and want in errtext
        rulecol = (err or {}).get("code", "no error")
        if not found: probs.append(f"expected a refusal naming {want} ({exp['expectRefusal']}); got "
                                   + (err.get("code") + ": " + err.get("message", "") if err else f"exit {rc}, no error"))
        ok_keys = ok_files = ok_rep = found
        keycol, filecol, repcol = "-", "-", "-"
    elif err:
        line = exp.get("yamlErrorLine")
        located = line is not None and want in errtext and re.search(rf"\b{line}\b", errtext)
        found = bool(located)
        rulecol = err.get("code", "?") + (" (line named)" if located else "")
        if not located: probs.append(f"{err.get('code')}: {err.get('message', '')}"[:160])
        ok_keys = ok_files = ok_rep = bool(located)
        keycol = filecol = repcol = "refused" if located else "-"
    else:
        read = True
        path, rule, inferred = reported_ss(st)
        found = path == want
        rulecol = (rule or "?") + ("*" if inferred else "")
        if not found: probs.append(f"read {path}, expected {want}")
        bkeys, bfiles, has_file, st_entries = board(st)
        dry = {}
        for n in exp["epicsToRun"]:
            d = load(f"{o}/dry-epic-{n}.json") or {}
            dry[n] = (d, open(f"{o}/dry-epic-{n}.rc").read().strip() if os.path.exists(f"{o}/dry-epic-{n}.rc") else "?")
        unrec = keys_of(find_lists(st, ("unrecognized",)))
        notrun = keys_of(find_lists(st, ("notRunnable",)))
        for d, _ in dry.values():
            unrec |= keys_of(find_lists(d, ("unrecognized",))); notrun |= keys_of(find_lists(d, ("notRunnable",)))
        gram = exp["keys"]["epics"] + exp["keys"]["stories"]
        allkeys = gram + [u["key"] for u in exp["unrecognized"]]
        missing = [k for k in allkeys if k not in bkeys and k not in unrec]
        miscl = [k for k in unrec if k in set(gram)]
        ok_keys = found and not missing and not miscl
        keycol = f"{len(allkeys) - len(missing)}/{len(allkeys)}"
        if missing: probs.append(f"{len(missing)} keys neither on the board nor reported, e.g. {', '.join(missing[:4])}")
        if miscl: probs.append(f"grammatical keys reported unrecognized: {', '.join(miscl[:4])}")
        req = [u["key"] for u in exp["unrecognized"]] + [n["key"] for n in exp["notRunnable"]]
        got = [k for k in req if k in unrec or k in notrun]
        runnable = {s["key"] for s in exp["stories"]}
        over = sorted(k for k in notrun if k in runnable)
        ok_rep = len(got) == len(req) and not over
        repcol = f"{len(got)}/{len(req)}" if req else "-"
        if len(got) < len(req):
            miss = [k for k in req if k not in got]
            probs.append(f"{len(miss)} of {len(req)} keys outside the grammar / statuses outside BMAD not reported, e.g. "
                         + ", ".join(f"{k}" for k in miss[:4]))
        if over: probs.append(f"runnable stories reported not runnable: {', '.join(over[:4])}")
        # plans: every runnable story planned with its real file; held / odd-status stories not planned silently
        plan = {}
        any_file_field = has_file
        for n, (d, drc) in dry.items():
            for e in d.get("plan", []) or []:
                if isinstance(e, dict) and isinstance(e.get("storyKey") or e.get("key"), str):
                    plan[e.get("storyKey") or e.get("key")] = (e, d, n)
                    if any(f in e for f in FILE_FIELDS + LIST_FIELDS): any_file_field = True
        right = withfile = withfile_right = 0
        bad = []
        for s in exp["stories"]:
            k = s["key"]
            if s["file"]: withfile += 1
            if k not in plan:
                n = int(s["epic"].split("-")[1]); d, drc = dry.get(n, ({}, "?"))
                why = (d.get("error") or {}).get("code") if isinstance(d.get("error"), dict) else d.get("outcome")
                bad.append(f"{k}: not planned (epic-{n}: exit {drc}, {why})"); continue
            e = plan[k][0]
            rep = entry_file(e, proj)
            if rep == "<absent>":
                rep = bfiles.get(k, "<absent>")
                if rep != "<absent>": rep = norm(rep) if norm(rep) and os.path.isfile(os.path.join(proj, norm(rep))) else None
            if rep == "<absent>" and any_file_field:
                rep = None   # baton names story files, but none for this story
            elif rep == "<absent>":   # baton names no story file at all: its lookup before the real-BMAD work
                guess = f"{path.rsplit('/', 1)[0]}/{k}.md" if path and "/" in path else f"{k}.md"
                rep = guess if os.path.isfile(os.path.join(proj, guess)) else None
            good = [s["file"]] + s.get("alsoOk", [])
            if rep is None and s["file"] and any(s["file"] in t for t in strings([e, st_entries.get(k)])):
                rep = [s["file"]]   # named in a message of the entry (e.g. "found in two places: …")
            if isinstance(rep, list):
                ok = bool(s.get("ambiguousOk")) and s["file"] in rep
            else:
                ok = rep in good
            if ok:
                right += 1
                if s["file"]: withfile_right += 1
            else:
                bad.append(f"{k}: story file {rep or 'none'}, really {s['file'] or 'none'}")
        told = notrun | unrec
        silent = []
        for h in exp["held"] + [dict(key=x["key"], status=x["status"]) for x in exp["notRunnable"] if x["kind"] == "story"]:
            k = h["key"]
            if k in plan:
                e, d, n = plan[k]
                marked = any(m in e for m in MARKERS)
                if not marked and k not in told and h.get("epic", "") not in told:
                    silent.append(f"{k} ({h['status']}" + (f", {h['epic']} {h['epicStatus']}" if "epic" in h else "") + ")")
        if silent: bad.append(f"plans without a word {len(silent)} stories it must not run: " + ", ".join(silent[:3]))
        ok_files = found and not bad
        filecol = f"{right}/{len(exp['stories'])}" + ("" if any_file_field else "*") + (f" ({withfile_right}/{withfile} with a file)" if withfile else "")
        probs += bad[:6] + ([f"… {len(bad) - 6} more"] if len(bad) > 6 else [])
    verdict = bool(found and ok_keys and ok_files and ok_rep and not wrote)
    g = gen_tot.setdefault(gen, [0, 0, 0]); g[0] += 1; g[1] += bool(found); g[2] += verdict
    rows.append((name, gen, ("y " if found else "n ") + (rulecol or ""), keycol, filecol, repcol, "y" if verdict else "n"))
    if probs: details.append((name, probs))

w = [max(len(str(r[i])) for r in rows + [("project", "gen", FOUND, "keys", "story files", "reported", "read right")]) for i in range(7)]
w[2] = min(w[2], 60)
def line(r): return "  ".join(str(c)[:w[i]].ljust(w[i]) for i, c in enumerate(r)).rstrip()
print(line(("project", "gen", FOUND, "keys", "story files", "reported", "read right")))
for r in rows: print(line(r))
n = len(rows)
print()
refused = sum(1 for r in rows if r[6] == "y" and r[3] == "refused")
print(("found with a one-line baton.toml" if with_config else "found without configuration")
      + f": {sum(1 for r in rows if r[2].startswith('y'))}/{n}; read right: {sum(1 for r in rows if r[6] == 'y')}/{n}"
      + (f" ({refused} of them a refusal naming the line of a file that is not valid YAML)" if refused else ""))
print("by generation (found / read right / projects): " + "; ".join(f"{g} {v[1]}/{v[2]}/{v[0]}" for g, v in sorted(gen_tot.items())))
print("keys: shown on the board or reported / all keys. story files: stories planned with their real file / stories a loop")
print("would act on (* = baton names no story file; its lookup {artifacts}/{key}.md assumed). reported: keys outside the")
print("grammar + statuses outside BMAD that baton reports / that exist. gen: A alpha bmad/, B .bmad/, C _bmad/bmm/config.yaml,")
print("D _bmad/config.toml (6.x), C* stale config, bare = no BMAD config.")
print()
for name, probs in details:
    print(f"{name}:")
    for p in probs: print(f"  - {p}")
PY
echo "(raw outputs: $OUT)"
