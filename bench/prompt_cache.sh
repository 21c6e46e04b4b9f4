#!/usr/bin/env bash
# What the three demos cost against a played provider that caches prompt prefixes as OpenAI
# does (cached tokens = the longest prefix seen before, from 1,024 tokens in blocks of 128, at
# 4 bytes a token), and the prefix figures of the reference run (cacheablePrefixShare,
# prefixExtensions) under both context policies (node, full). Prices: two providers' list prices
# on the date of baton's built-in table.
# Offline; no key. Usage: bench/prompt_cache.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building the examples…" >&2
cargo build --release --quiet -p baton-engine --example prompt_cache
cargo build --release --quiet -p baton-epic --example epic_cache
cargo build --release --quiet -p baton-lifecycle --example session_cache
ex=target/release/examples
# The reference conversation when it is beside the repository, else the demo trace (the same
# run: `baton demo` replays it).
"$ex/prompt_cache" > "$tmp/seed.json"
PROMPT_CACHE_CONTEXT=full "$ex/prompt_cache" > "$tmp/seed-full.json"
"$ex/prompt_cache" examples/traces/create-story-micro.trace.json > "$tmp/demo.json"
PROMPT_CACHE_CONTEXT=full "$ex/prompt_cache" examples/traces/create-story-micro.trace.json \
  > "$tmp/demo-full.json"
"$ex/epic_cache" > "$tmp/epic.json"
"$ex/session_cache" > "$tmp/session.json"
python3 - "$tmp" <<'PY'
import json, sys, os
d = sys.argv[1]
load = lambda n: json.load(open(os.path.join(d, n)))
# USD per million tokens: (input, cached input, output), as listed on 2025-10-01.
prices = {"OpenAI gpt-4.1": (2.00, 0.50, 8.00), "DeepSeek deepseek-chat": (0.28, 0.028, 0.42)}
def cost(p, prompt, cached, completion):
    i, c, o = p
    return ((prompt - cached) * i + cached * c + completion * o) / 1e6
seed = load("seed.json")
print(f"reference run ({seed['trace']}), by context policy:")
print(f"{'policy':<8}{'requests':>9}{'share':>7}{'ext.':>6}{'run ext.':>9}{'prompt':>9}"
      f"{'cached':>9}{'cached%':>8}" + "".join(f"{n + ' $':>26}" for n in prices))
for policy, r in [("node", seed), ("full", load("seed-full.json"))]:
    line = (f"{policy:<8}{r['requests']:>9}{r['cacheablePrefixShare']:>7.3f}"
            f"{r['prefixExtensions']:>6.2f}{r['runPrefixExtensions']:>9.2f}{r['promptTokens']:>9}"
            f"{r['cachedPromptTokens']:>9}{r['cachedShare']:>8.3f}")
    for p in prices.values():
        line += f"{cost(p, r['promptTokens'], r['cachedPromptTokens'], r['completionTokens']):>26.4f}"
    print(line)
print()
rows = [("baton demo (create-story)", load("demo.json")),
        ("  the same, --context full", load("demo-full.json")),
        ("baton demo epic", load("epic.json")), ("baton demo session", load("session.json"))]
head = f"{'demo':<28}{'requests':>9}{'prompt':>10}{'cached':>10}{'share':>7}{'output':>9}"
for name in prices:
    head += f"{name + ' $':>26}{'uncached $':>12}"
print(head)
for label, r in rows:
    line = (f"{label:<28}{r['requests']:>9}{r['promptTokens']:>10}{r['cachedPromptTokens']:>10}"
            f"{r['cachedShare']:>7.2f}{r['completionTokens']:>9}")
    for p in prices.values():
        line += f"{cost(p, r['promptTokens'], r['cachedPromptTokens'], r['completionTokens']):>26.4f}"
        line += f"{cost(p, r['promptTokens'], 0, r['completionTokens']):>12.4f}"
    print(line)
PY
