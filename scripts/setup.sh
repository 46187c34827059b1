#!/usr/bin/env bash
# Create .venv and install rlvr: `bash scripts/setup.sh` with its test extras (what the test
# suite needs: TRL, ray, peft, wandb...), `bash scripts/setup.sh --base` without them (what the
# main job needs; scripts/r1zero.sh). Idempotent: a stamp of pyproject.toml's hash and the
# extras installed skips the pip work when nothing changed (a test set-up covers --base).
# torch is pinned first: an unpinned torch resolves to a multi-GB CUDA build on Linux, while
# 2.13.0 (RLVR_TORCH_PIN to change it) resolves to a CPU wheel on our machines.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_PIN=${RLVR_TORCH_PIN:-torch==2.13.0}
extras="[test]"
if [ "${1:-}" = "--base" ]; then extras=""; fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.rlvr-install-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ]; then
  read -r have have_extras < "$stamp" || true
  if [ "$have" = "$want" ] && { [ -z "$extras" ] || [ "${have_extras:-}" = "$extras" ]; }; then
    exit 0
  fi
fi
log=.venv/pip-install.log
echo "setting up .venv${extras:+ with the test extras} (first run takes a minute or two; pip's log: $log)" >&2
{
  .venv/bin/python -m pip install --upgrade pip
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install "$TORCH_PIN"
  .venv/bin/python -m pip install -e ".$extras"
} > "$log" 2>&1 || { tail -n 30 "$log" >&2; echo "set-up failed; see $log" >&2; exit 1; }
echo "$want $extras" > "$stamp"
