#!/usr/bin/env bash
# Start or stop the matrix's Ray head of one version (scripts/compat_matrix.sh, and
# scripts/compat/check.py's head loss and return):
#
#   head.sh start VENV PORT TEMP_DIR CPUS   # `ray start --head` of that venv; 0 once it runs
#   head.sh stop TEMP_DIR                   # the processes of that head, and only those
#
# The head has a temp dir and ports of its own (TEMP_DIR, PORT … PORT+99; never the
# default /tmp/ray), the user's apps' folder on its PYTHONPATH, and metrics reported
# every second. `stop` never calls `ray stop`, which stops every head on the machine: it
# ends the processes that name this head's session folder or temp dir as Ray's own
# processes write it (`TEMP_DIR/session_…`, `--temp-dir=TEMP_DIR`, `--temp_dir=…`), so
# that a script whose arguments or files only lie under TEMP_DIR (check.py, the consoles
# it runs) is not one of them; and its Ray Client server, which names neither (Ray 2.50:
# `python -m ray.util.client.server --address=IP:PORT …`), by the head's GCS port, which
# `start` writes to TEMP_DIR/head-port.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

head_pattern() {  # a regex for pgrep/pkill -f
  local tmp=${1//./\\.} port
  port=$(cat "$1/head-port" 2>/dev/null)
  if [ -n "$port" ]; then
    echo "(${tmp}/session_|--temp[-_]dir=${tmp}( |$)|ray\.util\.client\.server --address=[^ ]*:${port}( |$))"
  else
    echo "(${tmp}/session_|--temp[-_]dir=${tmp}( |$))"
  fi
}

stop_head() {
  local tmp=$1 pat
  pat=$(head_pattern "$tmp")
  pkill -f -- "$pat" 2>/dev/null
  for _ in $(seq 1 15); do
    pgrep -f -- "$pat" >/dev/null || return 0
    sleep 1
  done
  pkill -9 -f -- "$pat" 2>/dev/null
  sleep 1
  return 0
}

start_head() {
  local venv=$1 port=$2 tmp=$3 cpus=$4
  mkdir -p "$tmp"
  # Up to 3 tries: on a loaded machine a head's raylet can give up waiting for its
  # dashboard agent ("Check failed" in NodeManager::WaitForDashboardAgentPorts, seen with
  # Ray 2.60 at a load average of 9 on 2 cores); a fresh start then comes up.
  for attempt in 1 2 3; do
    stop_head "$tmp"
    echo "$port" >"$tmp/head-port"
    echo "compat: ray start, try $attempt"
    # RAY_TMPDIR too: `ray start` writes the "current cluster" file under it, and another
    # user's ray.init() must not find this head through /tmp/ray.
    if RAY_TMPDIR=$tmp PYTHONPATH=$ROOT/scripts/compat/user_app RAY_USAGE_STATS_ENABLED=0 \
        "$venv/bin/ray" start --head --temp-dir="$tmp" --num-cpus="$cpus" \
          --port="$port" --dashboard-host=127.0.0.1 --dashboard-port=$((port + 65)) \
          --ray-client-server-port=$((port + 1)) --node-manager-port=$((port + 2)) \
          --object-manager-port=$((port + 3)) --metrics-export-port=$((port + 4)) \
          --dashboard-agent-listen-port=$((port + 5)) --dashboard-agent-grpc-port=$((port + 6)) \
          --runtime-env-agent-port=$((port + 7)) \
          --min-worker-port=$((port + 10)) --max-worker-port=$((port + 59)) \
          --system-config='{"metrics_report_interval_ms": 1000}'; then
      # `ray start` succeeds even when the dashboard gave up starting (Ray 2.56 at a load
      # average of 9 on 2 cores: "Module MetricsHead failed to start. Timeout after 30.0
      # seconds"): a head counts as started once its dashboard answers.
      for _ in $(seq 1 60); do
        curl -sf -o /dev/null --max-time 5 "http://127.0.0.1:$((port + 65))/api/version" \
          && return 0
        sleep 2
      done
      echo "compat: the head's dashboard does not answer (try $attempt)"
      continue
    fi
    echo "compat: the head did not start (try $attempt)"
  done
  stop_head "$tmp"
  return 1
}

case "${1:-}" in
  start) shift; [ $# -eq 4 ] || { echo "usage: head.sh start VENV PORT TEMP_DIR CPUS" >&2; exit 2; }
         start_head "$@" ;;
  stop) shift; [ $# -eq 1 ] || { echo "usage: head.sh stop TEMP_DIR" >&2; exit 2; }
        stop_head "$1" ;;
  *) echo "usage: head.sh start VENV PORT TEMP_DIR CPUS | stop TEMP_DIR" >&2; exit 2 ;;
esac
