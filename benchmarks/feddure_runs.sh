#!/bin/bash
# The CPU-scale FedDure experiments of docs/studies/feddure.md, one process at a time, one torch thread, nice'd:
# 3 seeds x 3 splits of scenarios/feddure_fmnist_cpu.toml (all nine methods), the two ablations on (DIR, DIR),
# and seed 0 of (DIR, DIR) again with 0.1 GHz device CPUs (time to accuracy under a compute-bound clock).
# Then: python benchmarks/feddure_table.py runs/feddure_cpu --figures docs/studies/figures
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
PY=${PY:-python}
RUNS=${RUNS:-runs/feddure_cpu}
run() {  # run <out> <edgesim run args...>
  local out=$1; shift
  [ -f "$RUNS/$out/summary.json" ] && return
  nice -n 10 $PY -m edgesim.scenarios.cli run scenarios/feddure_fmnist_cpu.toml --out "$RUNS/$out" -q --overwrite "$@"
}
for seed in 0 1 2; do
  for setting in dir_dir iid_iid iid_dir; do
    run ${setting}_s$seed --seed $seed --set data.partition=\"feddure_$setting\"
  done
  run ablation_dir_dir_s$seed --seed $seed --set data.partition=\"feddure_dir_dir\" \
      --set 'run.algorithms=["feddure_no_creg","feddure_no_freg"]'
  [ $seed = 0 ] && run slowcpu_dir_dir_s0 --seed 0 --set data.partition=\"feddure_dir_dir\" \
      --set system.cpu_freq_hz=1e8 --set 'run.algorithms=["feddure","fedmatch_lc","fedavg_labeled","fedavg_sl","fixavg"]'
done
# diagnostics of FedDure alone, seed 0 of (DIR, DIR): the options the paper leaves open
run diag_freg_lr_dir_dir_s0 --seed 0 --set data.partition=\"feddure_dir_dir\" --set 'run.algorithms=["feddure"]' \
    --set algorithms.feddure.freg_lr=2e-2
run diag_sum_dir_dir_s0 --seed 0 --set data.partition=\"feddure_dir_dir\" --set 'run.algorithms=["feddure"]' \
    --set algorithms.feddure.weight_norm=\"sum\"
run diag_code_sign_dir_dir_s0 --seed 0 --set data.partition=\"feddure_dir_dir\" --set 'run.algorithms=["feddure"]' \
    --set algorithms.feddure.feedback_sign=\"flipped\"
# a longer horizon (60 rounds), seed 0 of (IID, IID): do the semi-supervised methods overtake FedAvg* later?
run long_iid_iid_s0 --seed 0 --set data.partition=\"feddure_iid_iid\" --set budget.rounds=60 \
    --set 'run.algorithms=["feddure","fedmatch_lc","fedavg_labeled","fixavg","feddure_no_freg"]'
