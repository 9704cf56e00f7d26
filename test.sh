#!/usr/bin/env bash
# Set up (first time) and run the whole test suite: real Ray head, real Serve, Qt offscreen.
#
# Three passes. First the tests marked `timing` (wall-clock accuracy of the load
# generator) on a machine no Ray head loads; they use about a quarter of one core, so
# beside them, at a lower priority and on two workers, run the tests marked `light` (no
# Ray cluster, Prometheus or load generator of their own: widgets, logic, stub servers;
# tests/parallel.py). Then most of the rest on SERVE_CONSOLE_TEST_WORKERS pytest-xdist
# workers (default 2): much of a real-cluster test is waiting for Ray (a head starting,
# replicas deploying, a metrics report), so two overlap even on 2 cores; each worker takes
# work units whole (tests/parallel.py); more workers only pile more heads on the same
# cores. Last the tests marked `quiet`, one at a time: they measure a time bar (a death
# seen within 2 s, an exit within 7 s) or rates under load, which other heads on 2 cores
# stretch. Even two at a time held only on a quiet machine: on a slow one, a quiet test
# beside another's head starts and kills failed its bar (a demo at 20 req/s answering a
# third of that, the p99 of 100 ms sleeps over a second, an exit late by a fraction of a
# second).
# SERVE_CONSOLE_TEST_WORKERS=1 runs everything after the first pass in this process.
set -uo pipefail
cd "$(dirname "$0")"
scripts/setup.sh || exit 1
export QT_QPA_PLATFORM=offscreen
# Each pass and each xdist worker collects the whole suite: with bytecode caching off
# (PYTHONDONTWRITEBYTECODE, set in some images) every one of them would compile and
# assert-rewrite every test module again (a collection about three times as long).
unset PYTHONDONTWRITEBYTECODE
export SERVE_CONSOLE_SETTINGS="${SERVE_CONSOLE_SETTINGS:-$(mktemp -d)/settings.ini}"
# The consoles the tests start record their sessions here, not in the user's folder.
export SERVE_CONSOLE_SESSIONS="${SERVE_CONSOLE_SESSIONS:-$(mktemp -d)}"
workers="${SERVE_CONSOLE_TEST_WORKERS:-2}"
start=$SECONDS

run() { .venv/bin/python -m pytest "$@"; }
if [ "$workers" -gt 1 ]; then
  light_log=$(mktemp)
  nice -n 10 .venv/bin/python -m pytest -m "light and not timing" -n 2 --no-loadscope-reorder \
    "$@" > "$light_log" 2>&1 &
  light_pid=$!
  trap 'kill "$light_pid" 2>/dev/null' EXIT
fi
run -p no:xdist -m "timing" "$@"
rc_timing=$?
if [ "$workers" -gt 1 ]; then
  wait "$light_pid"
  rc_light=$?
  echo "test.sh: the light tests, run beside the timing tests:"
  cat "$light_log"
  rm -f "$light_log"
  run -m "not timing and not quiet and not light" -n "$workers" --no-loadscope-reorder "$@"
  rc_rest=$?
  run -p no:xdist -m "quiet and not timing" "$@"
  rc_quiet=$?
else
  run -p no:xdist -m "not timing" "$@"
  rc_rest=$?
  rc_quiet=5
  rc_light=5
fi
echo "test.sh: the passes took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"

# pytest's 5 means "no tests collected". One pass may select nothing (a filter that names
# only timing tests, say); every pass selecting nothing is a mistake in the command, not
# a pass, so say it plainly and fail.
if [ $rc_timing -eq 5 ] && [ $rc_light -eq 5 ] && [ $rc_rest -eq 5 ] && [ $rc_quiet -eq 5 ]; then
  echo "test.sh: no tests were collected (pytest exit 5)" >&2
  exit 5
fi
for rc in $rc_timing $rc_light $rc_rest $rc_quiet; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    exit "$rc"
  fi
done
exit 0
