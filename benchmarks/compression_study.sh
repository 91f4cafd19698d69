#!/bin/bash
# The compression study of docs/model/compression.md: FedAvg and FixAvg on the arena's cell with digits
# (scenarios/compression_study.toml: 20 devices, TDMA, 40 rounds), at 0.1, 1 and 10 MHz, nine uplink settings,
# three seeds: one `edgesim sweep` (81 run folders, each both algorithms) under $OUT (default
# /tmp/compression_study/sweep). Started again with the same arguments it skips the finished runs. Then:
#   python benchmarks/compression_study.py $OUT --figure docs/figures/compression_study.png
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/compression_study/sweep}
UPLINKS='"none","fp16",{method="qsgd",bits=8},{method="qsgd",bits=4},{method="qsgd",bits=2}'
UPLINKS+=',{method="topk",fraction=0.1},{method="topk",fraction=0.1,error_feedback=true}'
UPLINKS+=',{method="topk",fraction=0.01},{method="topk",fraction=0.01,error_feedback=true}'
exec .venv/bin/edgesim sweep scenarios/compression_study.toml --grid system.bandwidth_hz=1e5,1e6,1e7 \
  --grid "compression.uplink=$UPLINKS" --seeds 3 --jobs 1 --threads 1 --no-plots --out "$OUT" "$@"
