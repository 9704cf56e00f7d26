#!/usr/bin/env bash
# Check the console against real Ray heads of other versions, one at a time, and write
# docs/compatibility.md from the results.
#
#   scripts/compat_matrix.sh                      # the default versions below
#   scripts/compat_matrix.sh 2.50.1 2.60.0        # only these
#
# For each version: a venv for the CLUSTER side only (uv, Python 3.11, cached under
# ~/.cache/serve-console/ray-VERSION and reused), with ray[serve]==VERSION and torch's CPU
# build (the demos import torch on the replicas; uv links it from its cache); a head of
# that version with a temp dir and ports of its own (/tmp/rayv-VERSION, never the
# default /tmp/ray; scripts/compat/head.sh); a user's applications deployed with that
# version's own `serve deploy`; then scripts/compat/check.py runs the console (this
# checkout, its own venv's Ray) against it in its scripted, windowless mode and records
# each check in scripts/compat/results/ray-VERSION.json (its last check stops the head and
# starts it again, with head.sh). At the end scripts/compat/report.py rewrites
# docs/compatibility.md from every results file there. The head is stopped by killing
# its own processes (head.sh stop), then every process still naming its temp dir (never
# `ray stop`, which stops every head on the machine).
#
# Environment: CONSOLE_PYTHON (default .venv/bin/python), UV (default: uv next to it, or
# on PATH), COMPAT_CACHE (default ~/.cache/serve-console), COMPAT_BASE_PORT (default
# 36100; version i of the list gets ports BASE+100*i … +99), COMPAT_CPUS (default 4),
# COMPAT_RESULTS (default scripts/compat/results), COMPAT_REPORT (default
# docs/compatibility.md; empty: write no report, as the suite's own run does).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONSOLE_PYTHON=${CONSOLE_PYTHON:-$ROOT/.venv/bin/python}
UV=${UV:-$(dirname "$CONSOLE_PYTHON")/uv}
[ -x "$UV" ] || UV=$(command -v uv || true)
CACHE=${COMPAT_CACHE:-$HOME/.cache/serve-console}
BASE=${COMPAT_BASE_PORT:-36100}
CPUS=${COMPAT_CPUS:-4}
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(2.50.1 2.52.1 2.54.1 2.56.1 2.58.1 2.60.0)
RESULTS=${COMPAT_RESULTS:-$ROOT/scripts/compat/results}
REPORT=${COMPAT_REPORT-docs/compatibility.md}
mkdir -p "$RESULTS"
[ -x "$CONSOLE_PYTHON" ] || { echo "compat: no console Python at $CONSOLE_PYTHON" >&2; exit 2; }
[ -n "$UV" ] || { echo "compat: uv not found (set UV)" >&2; exit 2; }

# Pins a version's own requirements leave too loose. Up to Ray 2.54 Serve reads
# FieldDescriptor.label, which protobuf 7 removed: every `serve deploy` then fails in the
# controller ("'FieldDescriptor' object has no attribute 'label'"; Ray 2.56 reads it only
# where it exists). Under protobuf 5 the googleapis-common-protos uv picks (gencode 6.33)
# refuses to load, so: protobuf 6.
pins_for() {
  case "$1" in
    2.4[0-9].*|2.5[0-4].*) echo "protobuf>=6.33,<7" ;;
  esac
}

# The cluster side's venv, built once. Torch's CPU build comes from the wheel folders pip
# is configured with (find-links), as for the console's own venv.
ensure_venv() {
  local ver=$1 venv=$CACHE/ray-$1
  local find_links=()
  while read -r dir; do
    [ -e "$dir" ] && find_links+=(--find-links "$dir")
  done < <("$CONSOLE_PYTHON" -m pip config list 2>/dev/null \
             | sed -n "s/^[^.]*\.find-links='\(.*\)'$/\1/p" | tr ' ' '\n' | sed '/^$/d' | sort -u)
  if [ ! -x "$venv/bin/python" ]; then
    "$UV" venv -q --python 3.11 "$venv" || return 1
  fi
  # shellcheck disable=SC2046
  "$UV" pip install -q --python "$venv/bin/python" "${find_links[@]}" \
      "ray[serve]==$ver" "torch==$("$CONSOLE_PYTHON" -c 'import importlib.metadata as m; print(m.version("torch"))')" \
      numpy $(pins_for "$ver") || return 1
  # The head's processes load these: a protobuf mismatch shows here, not as a dead head.
  "$venv/bin/python" -c "import ray, ray.dashboard.dashboard, ray.core.generated.gcs_service_pb2, google.rpc.code_pb2, ray.serve, torch; assert ray.__version__ == '$ver', ray.__version__" \
    || return 1
  # Serve's config code reading FieldDescriptor.label without a fallback, under a protobuf
  # that has none: the controller would fail every deploy (pins_for above).
  "$venv/bin/python" - <<'PY' || return 1
import inspect
from google.protobuf.descriptor import FieldDescriptor
import ray.serve._private.config as config
source = inspect.getsource(config)
if "field.label" in source and "is_repeated" not in source \
        and not hasattr(FieldDescriptor, "label"):
    raise SystemExit("this protobuf has no FieldDescriptor.label, which this Ray's Serve "
                     "reads: pin protobuf<7 for it (pins_for)")
PY
  echo "$venv"
}

# The head's own processes (scripts/compat/head.sh stop), then, once nothing of this
# version's run is left running, every process that still names its temp dir.
sweep_head() {
  local tmp=$1
  scripts/compat/head.sh stop "$tmp"
  pkill -f -- "$tmp" 2>/dev/null
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pgrep -f -- "$tmp" >/dev/null || return 0
    sleep 1
  done
  pkill -9 -f -- "$tmp" 2>/dev/null
  return 0
}

i=0
for ver in "${VERSIONS[@]}"; do
  port=$((BASE + 100 * i))
  i=$((i + 1))
  tmp=/tmp/rayv-$ver
  log=$RESULTS/ray-$ver.log
  echo "== Ray $ver (ports $port…$((port + 99)), temp dir $tmp)" >&2
  t0=$(date +%s)
  if ! venv=$(ensure_venv "$ver" 2>"$log.venv"); then
    echo "compat: could not build the venv for Ray $ver (see $log.venv)" >&2
    "$CONSOLE_PYTHON" scripts/compat/check.py --ray-version "$ver" --out "$RESULTS/ray-$ver.json" \
        --started-s "$t0" --setup-failed "$(tail -n 3 "$log.venv" | tr '\n' ' ')"
    continue
  fi
  : >"$log"
  started=no
  sweep_head "$tmp"
  rm -rf "$tmp"
  if scripts/compat/head.sh start "$venv" "$port" "$tmp" "$CPUS" >>"$log" 2>&1; then
    started=yes
    # Which processes are this head's (head.sh stop ends those): for the log.
    pgrep -af -- "$tmp" >>"$log" 2>&1
  fi
  if [ $started = no ]; then
    echo "compat: Ray $ver's head did not start (see $log)" >&2
    "$CONSOLE_PYTHON" scripts/compat/check.py --ray-version "$ver" --out "$RESULTS/ray-$ver.json" \
        --started-s "$t0" --setup-failed "ray start failed: $(tail -n 3 "$log" | tr '\n' ' ')"
    sweep_head "$tmp"
    continue
  fi
  "$CONSOLE_PYTHON" scripts/compat/check.py --ray-version "$ver" --cluster-venv "$venv" \
      --dashboard "http://127.0.0.1:$((port + 65))" --serve-port $((port + 80)) \
      --temp-dir "$tmp" --port "$port" --cpus "$CPUS" \
      --out "$RESULTS/ray-$ver.json" --started-s "$t0" 2>&1 | tee -a "$log"
  sweep_head "$tmp"
done
if [ -n "$REPORT" ]; then
  "$CONSOLE_PYTHON" scripts/compat/report.py "$RESULTS" "$REPORT"
fi
