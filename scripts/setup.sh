#!/usr/bin/env bash
# Create .venv (if needed) and install serve-console with its test tools into it.
# Idempotent and quick when nothing changed: re-installs only when pyproject.toml, setup.py
# or the C source did.
#
# The install goes through uv (from PyPI, into the .venv), which fetches and unpacks in
# parallel: a clean clone installs in about a third of pip's time, the same packages at
# the same versions. uv does not read pip's configuration, so the wheel
# folders (find-links) and constraints pip is configured with here are handed to it; the
# torch pin then takes the local CPU wheel, as with pip. Should uv fail, pip installs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "serve-console: creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.serve-console-installed
# The one C extension (setup.py) is built by the install, in place: its source changing
# also calls for one.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
    || [ backend/metrics/_page_scan.c -nt "$stamp" ]; then
  echo "serve-console: installing dependencies into .venv (first time: a minute or so)" >&2
  pip_option() {  # every value pip is configured with for option $1 (files, env)
    .venv/bin/python -m pip config list 2>/dev/null \
      | sed -n "s/^[^.]*\.$1='\(.*\)'$/\1/p" | tr ' ' '\n' | sed '/^$/d' | sort -u
  }
  uv_args=()
  while read -r dir; do
    [ -e "$dir" ] && uv_args+=(--find-links "$dir")
  done < <(pip_option find-links)
  while read -r file; do
    [ -f "$file" ] && uv_args+=(--constraint "$file")
  done < <(pip_option constraint)
  if .venv/bin/python -m pip install -q uv \
      && .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python \
           --reinstall-package serve-console "${uv_args[@]}" -e ".[test]"; then
    :
  else
    echo "serve-console: uv could not install; installing with pip" >&2
    .venv/bin/python -m pip install -q --upgrade pip
    # torch is pinned in pyproject.toml; on a CPU machine that pin takes the local CPU
    # wheel instead of the multi-GB CUDA build.
    .venv/bin/python -m pip install -q -e ".[test]"
  fi
  touch "$stamp"
fi
