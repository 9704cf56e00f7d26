#!/usr/bin/env bash
# The demos on a GPU machine, without Qt: the batching benchmark (3 repeats) first, alone
# on the machine (its figures are the headline), then side by side, each with a Ray head
# of its own: the smoke test, the GPU tests that need no Qt, the streaming
# benchmark and the multiplex benchmark (their figures are taken while the others run).
# Each step's output goes to stderr; stdout gets one line per step,
# `{"step": NAME, "rc": N, "seconds": S, "result": {…}}` (result: the step's own last JSON
# line, or null), and a last line that sums them up. Exit 0 when every step passed.
# About 8 minutes on a 16-core H100 machine (batching ~5 min, then the rest ~2.5 min),
# plus the continuous-batching benchmark (up to 7 min; not yet run on a GPU).
#
#   scripts/gpu_check.sh                     # in the project's root, Ray + torch importable
#   scripts/gpu_check.sh gpu_tests multiplex # only those of the steps (batching smoke
#                                            # gpu_tests streaming multiplex continuous)
#
# A GPU machine without network or Qt: pack Ray, pytest and this tree with
# scripts/gpu_pack.sh here, copy .gpu/ there, then
#   bash .gpu/prelude.sh && . /tmp/gpu-env.sh && cd /tmp/proj && scripts/gpu_check.sh
# On a machine without a GPU it runs too (the demos compute on the CPU, the GPU figures
# are null and the real-GPU test is skipped, saying why).
#
# Where nvidia-smi lists a GPU, the three benchmarks run with --save: each appends its line
# (the GPU machine, the commit of the packed tree, from the .commit scripts/gpu_pack.sh
# writes) to $BENCHMARK_RESULTS/NAME.jsonl, by default $OUT/results/ where $OUT is set
# (a device run's folder that comes back), else benchmarks/results/. Back here, append
# them: `cat …/results/NAME.jsonl >> benchmarks/results/NAME.jsonl`, commit, and run
# benchmarks/report.py. GPU_CHECK_SAVE=0 saves nothing; where the commit is not known
# (no checkout, no .commit, no SERVE_CONSOLE_COMMIT) nothing is saved and it says why.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 QT_QPA_PLATFORM=offscreen
# Shorter benchmark trials than the defaults, to fit the time: a trial lasts ≥ 3 s and
# ≥ 100 requests (defaults 5 s, 300), so a trial's p99 is about its slowest request.
export BATCHING_TRIAL_S=${BATCHING_TRIAL_S:-3} BATCHING_MIN_REQUESTS=${BATCHING_MIN_REQUESTS:-100}
LOGS=$(mktemp -d)
export BENCHMARK_RESULTS=${BENCHMARK_RESULTS:-${OUT:+$OUT/results}}
save=""
if [ "${GPU_CHECK_SAVE:-1}" != 0 ]; then
  save=$("$PY" - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
import common
if not common.gpus():
    print("gpu_check: nvidia-smi lists no GPU: the benchmarks' lines are not saved",
          file=sys.stderr)
elif common.save_refusal():
    print("gpu_check: " + common.save_refusal(), file=sys.stderr)
else:
    print("--save")
PY
)
fi
[ -n "$save" ] && echo "gpu_check: saving to ${BENCHMARK_RESULTS:-benchmarks/results}/" >&2
want=" ${*:-smoke gpu_tests batching streaming multiplex continuous} "

step() {  # step NAME TIMEOUT_S COMMAND…  (its rc lands in $LOGS/NAME.rc)
  local name=$1 limit=$2; shift 2
  [[ "$want" == *" $name "* ]] || return 0
  echo "== $name: $*" >&2
  local t0=$SECONDS
  timeout --signal=TERM --kill-after=20 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  cat "$LOGS/$name.log" >&2
  echo "$rc" > "$LOGS/$name.rc"
  "$PY" - "$name" "$rc" "$((SECONDS - t0))" "$LOGS/$name.log" <<'PY'
import json, sys
name, rc, secs, log = sys.argv[1:5]
result = None
with open(log, encoding="utf-8", errors="replace") as f:
    for line in f:
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                pass
print(json.dumps({"step": name, "rc": int(rc), "seconds": int(secs), "result": result}),
      flush=True)
PY
}

"$PY" - <<'PY'
import json, torch
cuda = torch.cuda.is_available()
print(json.dumps({"step": "device", "rc": 0, "result": {
    "torch": torch.__version__, "cuda": cuda,
    "device": torch.cuda.get_device_name(0) if cuda else "cpu",
    "gpus": torch.cuda.device_count() if cuda else 0}}), flush=True)
PY

step batching 360 "$PY" benchmarks/batching_speedup.py 3 $save
# Side by side, four at once (in turn they would take ~4 more minutes); the starts a few
# seconds apart, so the Ray heads do not race for ports.
step smoke 240 "$PY" scripts/demo_smoke.py &
sleep 8
step gpu_tests 200 "$PY" -m pytest -q -p no:cacheprovider -o addopts= \
  tests/backend/test_demo_batched.py tests/backend/test_gpu_view_real.py \
  tests/backend/test_gpu_shares.py tests/backend/test_metrics_gpu.py &
sleep 8
step streaming 200 "$PY" benchmarks/streaming_pipeline.py 960 3 $save &
sleep 8
step multiplex 200 "$PY" benchmarks/multiplex_hit_rate.py 300 1 $save &
wait
# Continuous ÷ request-level batching on the generate demo (its replica on the GPU), alone
# again: a rate search per scheduler and repeat, with trials of CONTINUOUS_TRIAL_S.
step continuous 420 env CONTINUOUS_TRIAL_S="${CONTINUOUS_TRIAL_S:-8}" \
  "$PY" benchmarks/continuous_batching.py 3 $save
failed=()
steps=()
for f in "$LOGS"/*.rc; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .rc); rc=$(cat "$f")
  steps+=("$name=$rc")
  [ "$rc" -eq 0 ] || failed+=("$name")
done
saved_to=""
[ -n "$save" ] && saved_to=${BENCHMARK_RESULTS:-benchmarks/results}
echo "{\"step\": \"all\", \"rc\": ${#failed[@]}, \"steps\": \"${steps[*]}\", \"failed\": \"${failed[*]}\", \"saved_to\": \"$saved_to\"}"
rm -rf "$LOGS"
[ ${#failed[@]} -eq 0 ]
