#!/bin/bash
# The compression study of docs/compression.md: FedAvg* (fedavg_labeled) on the arena's labels-at-clients cell
# (scenarios/arena_labels_at_clients.toml: 20 devices, TDMA, 600 s or 20 rounds), one run per
# (uplink setting, bandwidth, seed), each in its own folder under $OUT (default /tmp/compression_study/runs).
# A folder that exists (or is being written, .incomplete) is skipped: rerun to go on. Then:
#   python benchmarks/compression_study.py $OUT --figure docs/figures/compression_0.1MHz.png
# Usage: benchmarks/compression_study.sh [SEEDS (default "0")] [BANDWIDTHS (default "1e5")] [SETTINGS]
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/compression_study/runs}
SEEDS=${1:-0}
BANDWIDTHS=${2:-1e5}
SETTINGS=${3:-"none fp16 qsgd8 qsgd4 qsgd2 top1 top1ef top10 top10ef"}
declare -A SET=(
  [none]=""
  [fp16]="--set compression.uplink=fp16"
  [qsgd8]="--set compression.uplink.method=qsgd --set compression.uplink.bits=8"
  [qsgd4]="--set compression.uplink.method=qsgd --set compression.uplink.bits=4"
  [qsgd2]="--set compression.uplink.method=qsgd --set compression.uplink.bits=2"
  [top1]="--set compression.uplink.method=topk --set compression.uplink.fraction=0.01"
  [top1ef]="--set compression.uplink.method=topk --set compression.uplink.fraction=0.01 --set compression.uplink.error_feedback=true"
  [top10]="--set compression.uplink.method=topk --set compression.uplink.fraction=0.1"
  [top10ef]="--set compression.uplink.method=topk --set compression.uplink.fraction=0.1 --set compression.uplink.error_feedback=true"
)
mkdir -p "$OUT"
for seed in $SEEDS; do for bw in $BANDWIDTHS; do for s in $SETTINGS; do
  out=$OUT/${s}_bw${bw}_s${seed}
  [ -d "$out" ] || [ -d "$out.incomplete" ] && continue
  start=$(date +%s)
  # shellcheck disable=SC2086
  .venv/bin/edgesim run scenarios/arena_labels_at_clients.toml --set "run.algorithms=['fedavg_labeled']" \
    --set system.bandwidth_hz="$bw" --seed "$seed" ${SET[$s]} --out "$out" -q
  echo "$s $bw $seed rc=$? $(( $(date +%s) - start )) s"
done; done; done
