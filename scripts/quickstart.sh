#!/usr/bin/env bash
# Offline scoring in one command (the README's "Score your own file"): score the sample
# completions shipped with rlvr against the arithmetic environment and print the summary.
# Sets up .venv on first use, without the test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --base
out=runs/quickstart/scored.jsonl
rm -f "$out" "$out.meta.json"
.venv/bin/rlvr score --env arithmetic rlvr/data/arithmetic_sample.jsonl -o "$out" "$@"
echo "first scored row:"
head -n 1 "$out"
