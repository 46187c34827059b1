#!/usr/bin/env bash
# The README's test command: set up .venv, start the services the tests need, run the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -f scripts/services.sh ]; then
  PYTHON=.venv/bin/python bash scripts/services.sh
fi
exec .venv/bin/python -m pytest "$@"
