#!/usr/bin/env bash
# Create .venv (if needed) and install serve-console with its test tools into it.
# Idempotent and quick when nothing changed: re-installs only when pyproject.toml did.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "serve-console: creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.serve-console-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "serve-console: installing dependencies into .venv (first time: a few minutes)" >&2
  .venv/bin/python -m pip install -q --upgrade pip
  # torch is pinned in pyproject.toml; on a CPU machine that pin takes the local CPU
  # wheel instead of the multi-GB CUDA build.
  .venv/bin/python -m pip install -q -e ".[test]"
  touch "$stamp"
fi
