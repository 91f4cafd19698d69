#!/usr/bin/env bash
# The papers' scale in one GPU window (docs/use/gpu.md): on one H100/H200, within a total of 9 minutes,
#   the device, torch and CUDA versions; `pytest -m gpu` (alone, at most 60 s);
#   then benchmarks/gpu_paper.py's jobs in priority order under one time guard, packed several to the GPU:
#   (b0) first and alone, FixAvg at FedDure's layout (no round in 359 s last window) under --round-timeout-s 60,
#   which names the phase a round is stuck in; (a) DoFed-SPP SUBSET/NORMAL at size_scale 1, 5 methods, seeds 0-2;
#   (b) FedDure Fashion-MNIST (IID, IID); (c) UM-pFSSL Table 1 at alpha 0.5, five clients a vectorised pass;
#   (d) labels at the server, 200 rounds; the 1,000-device moonshot, evaluated on 10 % of the devices, and again
#   with its clients on 8 worker processes (--client-workers 8); (e) the labels-at-clients arena twin's host time
#   per round, five clients a vectorised pass. b, c and e evaluate every 5th round (eval_every), without the
#   labelling diagnostic; the job list and why: benchmarks/gpu_paper.py's docstring.
# Everything lands in $OUT: gpu.txt, gpu_tests.log, paper.log, summary.json, summary.md, and the run folders
# packed as runs.tgz (the run folders themselves stay in $RUNS, default $OUT/work).
#
#   OUT=/tmp/gpu_paper DATA=../shared/data bash benchmarks/gpu_paper.sh            # on the GPU machine
#   OUT=/tmp/gpu_paper DATA=../shared/data bash benchmarks/gpu_paper.sh --dry-run  # anywhere: 2 rounds, tiny
#
# TOTAL_S (default 540) is the whole window in seconds, counted from this script's start. CURVE_S (default 0: not
# run) gives the client workers' scaling curve that many seconds after the runs, alone on the CPU cores (no GPU):
# a 20-device FixAvg round on 1, 2, 4, 8 and 16 worker processes (benchmarks/client_workers.py, issue 51 item 3),
# into $OUT/client_workers.txt.
set -uo pipefail
DRY=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY="--dry-run" ;;
    *) echo "error: benchmarks/gpu_paper.sh: unknown option $arg; expected --dry-run or nothing" >&2; exit 2 ;;
  esac
done
START=$(date +%s)
OUT=${OUT:-/tmp/gpu_paper}; DATA=${DATA:-../shared/data}; PY=${PY:-python3}; TOTAL_S=${TOTAL_S:-540}
RUNS=${RUNS:-$OUT/work}
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "error: OUT=$OUT: is not empty; give a new or empty folder (nothing was written)" >&2; exit 2
fi
if [ -e "$RUNS" ] && [ -n "$(ls -A "$RUNS" 2>/dev/null)" ]; then
  echo "error: RUNS=$RUNS: is not empty; give a new or empty folder (nothing was written)" >&2; exit 2
fi
mkdir -p "$OUT" "$RUNS"
export PYTHONUNBUFFERED=1
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  else
    echo "no nvidia-smi: no NVIDIA GPU"
  fi
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available())"
  echo "cpu cores $(nproc)"
} 2>&1 | tee "$OUT/gpu.txt"

echo "== pytest -m gpu (alone on the GPU, at most 60 s)"
# First and alone: beside the runs (the window of 2026-11-27) one test failed with the GPU's memory full, and the
# 60 s limit cut pytest before it named it; -v names each test as it ends, -x stops at the first failure and prints it.
if [ -z "$DRY" ]; then
  timeout 60 $PY -m pytest -v -x -m gpu tests/test_gpu.py -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1
  TESTS_STATUS=$?
else
  echo "dry run: the gpu tests are not run" > "$OUT/gpu_tests.log"; TESTS_STATUS=0
fi
echo "pytest -m gpu: exit $TESTS_STATUS (124: stopped at 60 s)"
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUT/gpu_tests.log" | tail -12

LEFT=$(( TOTAL_S - ($(date +%s) - START) - 15 ))   # 15 s kept for packing the run folders
echo "== paper-scale runs (guard: $LEFT s)"
$PY benchmarks/gpu_paper.py --out "$RUNS" --data-dir "$DATA" --total-s "$LEFT" $DRY 2>&1 | tee "$OUT/paper.log"
STATUS=${PIPESTATUS[0]}

CURVE_S=${CURVE_S:-0}
if [ "$CURVE_S" -gt 0 ] && [ -z "$DRY" ]; then
  echo "== client workers' scaling curve (at most $CURVE_S s)"
  CUDA_VISIBLE_DEVICES="" EDGESIM_DATA="$DATA" OMP_NUM_THREADS=1 timeout "$CURVE_S" \
    $PY benchmarks/client_workers.py --workers 1 2 4 8 16 --repeats 1 --rounds 3 > "$OUT/client_workers.txt" 2>&1
  echo "client_workers.py: exit $? (124: stopped at $CURVE_S s)"; tail -8 "$OUT/client_workers.txt"
fi

cp "$RUNS/summary.json" "$RUNS/summary.md" "$OUT/" 2>/dev/null
tar -czf "$OUT/runs.tgz" -C "$RUNS" --exclude='checkpoints' runs
if [ "$(stat -c %s "$OUT/runs.tgz")" -gt 15000000 ]; then   # the device tool brings back files up to 16 MiB
  echo "runs.tgz is over 15 MB: packed again without devices.csv, events.csv, graphs/ and figures"
  tar -czf "$OUT/runs.tgz" -C "$RUNS" --exclude='checkpoints' --exclude='devices.csv' --exclude='events.csv' \
    --exclude='graphs' --exclude='*.png' --exclude='*.pdf' --exclude='*.svg' runs
fi
echo "== packed: $(du -h "$OUT/runs.tgz" | cut -f1) in $OUT/runs.tgz; window $(( $(date +%s) - START )) s"
exit "$STATUS"
