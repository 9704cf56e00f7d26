#!/usr/bin/env bash
# The demos on a GPU machine, without Qt: smoke test, the GPU tests that need no Qt, the
# batching benchmark (3 repeats), the streaming and multiplex benchmarks. Each step prints
# its own output and then one line `{"step": NAME, "rc": N, "seconds": S, "result": {…}}`
# (result: the step's own last JSON line, or null); the last line sums them up. Exit 0
# when every step passed. Made to finish within ~8 minutes on a 16-core H100 machine.
#
#   scripts/gpu_check.sh                     # in the project's root, Ray + torch importable
#   scripts/gpu_check.sh batching smoke      # only those steps (smoke gpu_tests batching
#                                            # streaming multiplex), in that order
#
# A GPU machine without network or Qt: pack Ray, pytest and this tree with
# scripts/gpu_pack.sh here, copy .gpu/ there, then
#   bash .gpu/prelude.sh && . /tmp/gpu-env.sh && cd /tmp/proj && scripts/gpu_check.sh
# On a machine without a GPU it runs too (the demos compute on the CPU, the GPU figures
# are null and the real-GPU test is skipped, saying why).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 QT_QPA_PLATFORM=offscreen
# Shorter benchmark trials than the defaults, to fit the time: a trial lasts ≥ 3 s and
# ≥ 100 requests (defaults 5 s, 300), so a trial's p99 is about its slowest request.
export BATCHING_TRIAL_S=${BATCHING_TRIAL_S:-3} BATCHING_MIN_REQUESTS=${BATCHING_MIN_REQUESTS:-100}
LOGS=$(mktemp -d)
failed=()
summary=()

want=" ${*:-smoke gpu_tests batching streaming multiplex} "

step() {  # step NAME TIMEOUT_S COMMAND…
  local name=$1 limit=$2; shift 2
  [[ "$want" == *" $name "* ]] || return 0
  echo "== $name: $*" >&2
  local t0=$SECONDS
  timeout --signal=TERM --kill-after=20 "$limit" "$@" 2>&1 | tee "$LOGS/$name.log" >&2
  local rc=${PIPESTATUS[0]}
  local result
  result=$(grep -E '^\{' "$LOGS/$name.log" | tail -n 1)
  "$PY" - "$name" "$rc" "$((SECONDS - t0))" "$result" <<'PY'
import json, sys
name, rc, secs, last = sys.argv[1:5]
try:
    result = json.loads(last) if last else None
except ValueError:
    result = None
print(json.dumps({"step": name, "rc": int(rc), "seconds": int(secs), "result": result}),
      flush=True)
PY
  summary+=("$name=$rc")
  [ "$rc" -eq 0 ] || failed+=("$name")
}

"$PY" - <<'PY'
import json, torch
cuda = torch.cuda.is_available()
print(json.dumps({"step": "device", "rc": 0, "result": {
    "torch": torch.__version__, "cuda": cuda,
    "device": torch.cuda.get_device_name(0) if cuda else "cpu",
    "gpus": torch.cuda.device_count() if cuda else 0}}), flush=True)
PY

step smoke 150 "$PY" scripts/demo_smoke.py
step gpu_tests 150 "$PY" -m pytest -q -p no:cacheprovider -o addopts= \
  tests/backend/test_demo_batched.py tests/backend/test_gpu_view_real.py \
  tests/backend/test_gpu_shares.py tests/backend/test_metrics_gpu.py
step batching 330 "$PY" benchmarks/batching_speedup.py 3
step streaming 90 "$PY" benchmarks/streaming_pipeline.py 1920 3
step multiplex 90 "$PY" benchmarks/multiplex_hit_rate.py 300 1
echo "{\"step\": \"all\", \"rc\": ${#failed[@]}, \"steps\": \"${summary[*]}\", \"failed\": \"${failed[*]}\"}"
rm -rf "$LOGS"
[ ${#failed[@]} -eq 0 ]
