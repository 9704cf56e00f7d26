#!/usr/bin/env bash
# Set up (first time) and run the whole test suite: real Ray head, real Serve, Qt offscreen.
#
# Two passes. First the tests marked `timing` (wall-clock accuracy of the load generator)
# alone, on a quiet machine. Then the rest on SERVE_CONSOLE_TEST_WORKERS pytest-xdist
# workers (default 2): most of a real-cluster test is waiting for Ray (a head starting,
# replicas deploying, a metrics report), so two of them overlap well even on 2 cores.
# Each worker runs a package's cluster tests, or a module, whole (tests/conftest.py).
# SERVE_CONSOLE_TEST_WORKERS=1 runs the second pass in this process.
set -uo pipefail
cd "$(dirname "$0")"
scripts/setup.sh || exit 1
export QT_QPA_PLATFORM=offscreen
export SERVE_CONSOLE_SETTINGS="${SERVE_CONSOLE_SETTINGS:-$(mktemp -d)/settings.ini}"
# The consoles the tests start record their sessions here, not in the user's folder.
export SERVE_CONSOLE_SESSIONS="${SERVE_CONSOLE_SESSIONS:-$(mktemp -d)}"
workers="${SERVE_CONSOLE_TEST_WORKERS:-2}"
start=$SECONDS

.venv/bin/python -m pytest -p no:xdist -m timing "$@"
rc_timing=$?
if [ "$workers" -gt 1 ]; then
  .venv/bin/python -m pytest -m "not timing" -n "$workers" \
    --no-loadscope-reorder "$@"
else
  .venv/bin/python -m pytest -p no:xdist -m "not timing" "$@"
fi
rc_rest=$?
echo "test.sh: both passes took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"

# pytest's 5 means "no tests collected". One pass may select nothing (a filter that names
# only timing tests, or none); both selecting nothing is a mistake in the command, not a
# pass, so say it plainly and fail.
if [ $rc_timing -eq 5 ] && [ $rc_rest -eq 5 ]; then
  echo "test.sh: no tests were collected (pytest exit 5)" >&2
  exit 5
fi
for rc in $rc_timing $rc_rest; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    exit "$rc"
  fi
done
exit 0
