#!/bin/bash
# float32 against bfloat16 (channels-last both), 3 seeds, each seed's pair back to back, one CPU thread:
# the default scenario (FedAvg, FedProx, Local), labels at the server (las_fmnist_cpu, FedMatch) and the
# labels-at-clients arena's FixAvg (FixMatch family). Then: python benchmarks/numerics_accuracy.py OUT
# Usage: EDGESIM_DATA=../shared/data benchmarks/numerics_accuracy.sh [OUT]   (docs/model/numerics.md, "Accuracy")
cd "$(dirname "$0")/.."
OUT=${1:-runs/numerics}
mkdir -p "$OUT"
for spec in "default|scenarios/default.toml|" \
            "las|scenarios/las_fmnist_cpu.toml|--set run.algorithms=[\"fedmatch\"]" \
            "fixavg|scenarios/arena_labels_at_clients.toml|--set run.algorithms=[\"fixavg\"]"; do
  IFS='|' read -r name file extra <<< "$spec"
  for seed in 0 1 2; do
    for prec in float32 bfloat16; do
      o=$OUT/${name}_s${seed}_${prec}
      [ -f "$o/rounds.csv" ] && continue
      t0=$(date +%s)
      eval .venv/bin/edgesim run "$file" --out "$o" --set seed=$seed --set train.precision=\\\"$prec\\\" $extra \
        > "$o.log" 2>&1
      echo "$name seed $seed $prec rc $? $(( $(date +%s) - t0 )) s load $(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/times.log"
    done
  done
done
