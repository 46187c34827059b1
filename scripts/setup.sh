#!/usr/bin/env bash
# Create .venv and install rlvr with its test extras. Idempotent: a stamp of pyproject.toml's hash
# skips the pip work when nothing changed. torch is pinned first: an unpinned torch would pull a
# multi-GB CUDA build (see DEVELOPERS.md); 2.13.0 resolves to a CPU wheel on our machines.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_PIN=${RLVR_TORCH_PIN:-torch==2.13.0}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.rlvr-install-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
log=.venv/pip-install.log
echo "setting up .venv (first run takes a minute or two; pip's log: $log)" >&2
{
  .venv/bin/python -m pip install --upgrade pip
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install "$TORCH_PIN"
  .venv/bin/python -m pip install -e ".[test]"
} > "$log" 2>&1 || { tail -n 30 "$log" >&2; echo "set-up failed; see $log" >&2; exit 1; }
echo "$want" > "$stamp"
