#!/usr/bin/env bash
# Everything this project measures on a GPU, in one go (the device machine of a session, or any CUDA box):
# the gpu tests, the trainer's vmap-vs-sequential rounds, client scaling, FixMatch's step cost, the
# DoFed-SPP Fashion-MNIST round, determinism's cost, and several runs sharing one GPU.
#
#   OUT=/tmp/gpu DATA=.data bash benchmarks/gpu_session.sh     # DATA holds fashion-mnist/
#
# Results: $OUT/*.json and $OUT/*.log; the summary lines are printed.
set -uo pipefail
OUT=${OUT:-/tmp/gpu}; DATA=${DATA:-../shared/data}; PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

echo "== gpu tests"
timeout 300 $PY -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -s 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|max \||synchronising|Error|^FAILED" | tail -20

echo "== trainer rounds (vmap vs sequential)"
$PY benchmarks/trainer.py rounds --device cuda --model resnet9 --clients 10 --samples 500 --batch 64 --reps 5 --json "$OUT/rounds_resnet9.json" > /dev/null
$PY benchmarks/trainer.py rounds --device cuda --model peer_cnn --clients 10 --samples 1000 --batch 50 --reps 5 --json "$OUT/rounds_peer.json" > /dev/null
$PY benchmarks/trainer.py rounds --device cuda --model resnet9 --clients 10 --samples 128 --batch 16 --reps 5 --json "$OUT/rounds_resnet9_small.json" > /dev/null
for f in rounds_resnet9 rounds_peer rounds_resnet9_small; do
  $PY -c "import json,sys; r=json.load(open('$OUT/$f.json')); print('$f', {k: r[k] for k in ('sequential_s','vmap_s','speedup_vmap','vmap_tflops','vmap_share_of_peak','vmap_peak_mem_gib')})"
done

echo "== scaling"
$PY benchmarks/trainer.py scaling --device cuda --model resnet9 --clients 10,20,50,100,200,400 --samples 256 --batch 32 --reps 1 --json "$OUT/scaling_resnet9.json" | tail -40 | tr -d '\n' ; echo
$PY benchmarks/trainer.py scaling --device cuda --model peer_cnn --clients 10,50,100,200,500,1000 --samples 500 --batch 50 --reps 1 --json "$OUT/scaling_peer.json" | tail -40 | tr -d '\n' ; echo

echo "== FixMatch step cost"
$PY benchmarks/trainer.py fixmatch --device cuda --model resnet9 --batch 64 --mu 7 --reps 5 --json "$OUT/fixmatch_gpu.json" | grep -E "ratio|_s\""

echo "== DoFed-SPP Fashion-MNIST round"
$PY benchmarks/dofed_round.py --rounds 3 --set "data.data_dir=\"$DATA\"" --set "train.device='cuda'" 2>&1 | tail -8 | tee "$OUT/dofed_round.log"

echo "== determinism and its cost (default scenario, ResNet-9, GPU)"
$PY benchmarks/gpu_determinism.py --out "$OUT" 2>&1 | tail -6

echo "== several runs on one GPU (process pool)"
$PY benchmarks/gpu_sweep.py --out "$OUT" 2>&1 | tail -6
