#!/bin/bash
# The label-scarce studies of issue 35 (docs/studies/ssl_limit.md), whole: run unchanged on a GPU or a bigger CPU.
#  1. the label-scarce arena (scenarios/arena_label_scarce.toml), both of FedDure's Fashion-MNIST layouts:
#     every method's learning rate tuned on a validation split (4 rates, tuning seeds 100 and 101), then 5 seeds,
#     paired against FedAvg* (the floor);
#  2. labels at the server with fewer labels (scenarios/las_fmnist_550.toml, 100 and 250 server labels): FedMatch,
#     FedMix+FedFreq and supervised only, tuned the same way on held-out server labels, then 5 seeds;
#  3. (las_floor, not in all) the floor's control: supervised only with 10 server epochs a round, tuned and run the
#     same way (one full-batch step a round at 100 labels leaves it unstable: docs/studies/labels_at_server.md);
#  4. (las_off, not in all) FedMatch with its unlabelled terms off (lambda_a = lambda_i = 0) at its chosen rate: what
#     its decomposition gives without the unlabelled data.
# Environment: SCENARIO (default the full arena; scenarios/label_scarce_cpu.toml is the CPU cut), RUNS (out
# folder), JOBS (parallel runs; 1 on a shared CPU), SEEDS (5),
# STAGE (all | arena = tune + final of both layouts | tune | final | las | las_floor | las_off),
# TUNE_ROUNDS (the tuning runs' rounds; the scenario's unless set), TUNE_SEEDS (2), GRIDS (the methods and their rate grids, below),
# LAYOUTS ("iid dir"; one of them to run a layout alone), SETS (more --set KEY=VALUE words for every run of the arena
# stages, e.g. SETS="algorithms.pfedme.personal_lr=0.03").
# Tables: python benchmarks/label_scarce_study.py final $RUNS/final_* ; edgesim report $RUNS/final_iid --baseline
# fedavg_labeled. Measured cost: docs/studies/ssl_limit.md ("The full study").
set -eu
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
PY=${PY:-python}
SCENARIO=${SCENARIO:-scenarios/arena_label_scarce.toml}
RUNS=${RUNS:-runs/label_scarce}
JOBS=${JOBS:-1}
SEEDS=${SEEDS:-5}
STAGE=${STAGE:-all}
# GRIDS: each method and the four learning rates it is tuned over (its own [algorithms.NAME] lr); the final stage
# runs the methods GRIDS names. "NAME:r1,r2+key1,key2=v1,v2" tunes the rates times each v set on every key at once
# (FedDure's eta_s = eta_w: "feddure:0.001,0.002+creg_lr,freg_lr=0.0005,0.002", 4 runs a tuning seed). Another set (e.g. the rest of the FixMatch/UDA family) runs the same way into its own
# RUNS folder, and `final` takes both folders: the seeds pair across them.
SGD=0.005,0.01,0.02,0.05
GRIDS=${GRIDS:-"fedavg_labeled:$SGD fixavg:$SGD fedavg_sl:$SGD feddure:0.0005,0.001,0.002,0.004 fedmatch_lc:0.00025,0.0005,0.001,0.002"}
METHODS="[$(for g in $GRIDS; do printf '"%s",' "${g%%:*}"; done | sed 's/,$//')]"
TUNE_SEEDS=${TUNE_SEEDS:-2}  # tuning seeds per grid point: 100, 101, ...
VALIDATION=${VALIDATION:-10000}  # train images outside the pool the tuning runs evaluate on (never the test set)
rounds=(); [ -n "${TUNE_ROUNDS:-}" ] && rounds=(--set budget.rounds=$TUNE_ROUNDS)  # tuning runs' length
sweep() { nice -n 10 $PY -m edgesim.scenarios.cli sweep "$@" --jobs "$JOBS" --threads 1 --no-plots; }
extra=(); for s in ${SETS:-}; do extra+=(--set "$s"); done

for layout in ${LAYOUTS:-iid dir}; do
  part=feddure_${layout}_${layout}
  tune=(--set data.partition=\"$part\" --set data.validation_size=$VALIDATION --seeds "$TUNE_SEEDS" --set seed=100
        "${extra[@]}")
  if [ "$STAGE" = all ] || [ "$STAGE" = arena ] || [ "$STAGE" = tune ]; then
    # One sweep per method over its own [algorithms.NAME] lr: a scenario's per-method rate overrides [train] lr,
    # so a grid over train.lr would leave such a method at its file's rate while the table credited the grid's.
    for alg in $GRIDS; do
      name=${alg%%:*}; rest=${alg#*:}; rates=${rest%%+*}
      if [ "$rest" = "$rates" ]; then
        sweep "$SCENARIO" --grid algorithms.$name.lr=$rates --set "run.algorithms=[\"$name\"]" \
          "${tune[@]}" "${rounds[@]}" --out "$RUNS/tune_${layout}_$name"
      else  # name:rates+key1,key2=v1,v2: the rates times each v, set on every key at once (tied: η_s = η_w)
        tied=${rest#*+}; keys=${tied%%=*}
        vals=${tied#*=}
        for v in ${vals//,/ }; do
          vset=(); for k in ${keys//,/ }; do vset+=(--set "algorithms.$name.$k=$v"); done
          sweep "$SCENARIO" --grid algorithms.$name.lr=$rates --set "run.algorithms=[\"$name\"]" "${vset[@]}" \
            "${tune[@]}" "${rounds[@]}" --out "$RUNS/tune_${layout}_${name}_${keys%%,*}$v"
        done
      fi
    done
  fi
  if [ "$STAGE" = all ] || [ "$STAGE" = arena ] || [ "$STAGE" = final ]; then
    # the per-method rates chosen on validation; [algorithms.X] lr overrides [train] lr for that method alone
    mapfile -t chosen < <($PY benchmarks/label_scarce_study.py choose "$RUNS"/tune_${layout}_* | sed 's/^--set //')
    sets=(); for c in "${chosen[@]}"; do sets+=(--set "$c"); done
    sweep "$SCENARIO" --set data.partition=\"$part\" --set "run.algorithms=$METHODS" "${sets[@]}" "${extra[@]}" \
      --seeds "$SEEDS" --out "$RUNS/final_${layout}"
  fi
done

if [ "$STAGE" = all ] || [ "$STAGE" = las ]; then
  # LAS_LABELS (100 250), LAS_TUNE_ROUNDS (the scenario's 60; the CPU study used 20), PRECISION (the scenario's
  # float32 unless set; the CPU study used bfloat16). Each method gets the same budget: 3 rates, 2 tuning seeds.
  # The grids are {r/4, r/2, r} below each method's 1,000-label rate r (docs/studies/labels_at_server.md, "Fewer labels").
  # LAS_GRIDS (the methods and their rates, the three below unless set), LAS_TUNE_SEEDS (2), LAS_ROUNDS (the final
  # runs' rounds; the scenario's 60 unless set), LAS_SETS (more --set KEY=VALUE words for every run of the stage).
  prec=(); [ -n "${PRECISION:-}" ] && prec=(--set "train.precision=\"$PRECISION\"")
  for s in ${LAS_SETS:-}; do prec+=(--set "$s"); done
  final_rounds=(); [ -n "${LAS_ROUNDS:-}" ] && final_rounds=(--set budget.rounds=$LAS_ROUNDS)
  for labels in ${LAS_LABELS:-100 250}; do
    held=$((labels / 5))  # a fifth of the server's labels held out for tuning (20 of 100, 50 of 250)
    pool=$((55000 + labels))  # 550 unlabelled images on each of the 100 clients, as at 1,000 labels
    las=(scenarios/las_fmnist_550.toml --set data.server_labeled=$labels --set data.train_pool_size=$pool "${prec[@]}")
    for alg in ${LAS_GRIDS:-server_only:0.01,0.02,0.04 fedmatch:0.00125,0.0025,0.005 fedmix:0.005,0.01,0.02}; do
      sweep "${las[@]}" --set data.server_validation=$held --set budget.rounds=${LAS_TUNE_ROUNDS:-60} \
        --set "run.algorithms=[\"${alg%%:*}\"]" --grid algorithms.${alg%%:*}.lr=${alg#*:} \
        --seeds "${LAS_TUNE_SEEDS:-2}" --set seed=100 --out "$RUNS/las_tune_${labels}_${alg%%:*}"
    done
    mapfile -t chosen < <($PY benchmarks/label_scarce_study.py choose --column val_accuracy "$RUNS"/las_tune_${labels}_* \
                          | sed 's/^--set //')
    sets=(); for c in "${chosen[@]}"; do sets+=(--set "$c"); done
    las_methods="[$(for g in ${LAS_GRIDS:-fedmix fedmatch server_only}; do printf '"%s",' "${g%%:*}"; done | sed 's/,$//')]"
    sweep "${las[@]}" "${sets[@]}" --set "run.algorithms=$las_methods" "${final_rounds[@]}" --seeds "$SEEDS" \
      --out "$RUNS/las_$labels"
  done
fi

if [ "$STAGE" = las_floor ]; then
  prec=(); [ -n "${PRECISION:-}" ] && prec=(--set "train.precision=\"$PRECISION\"")
  for labels in ${LAS_LABELS:-100 250}; do
    held=$((labels / 5)); pool=$((55000 + labels))
    las=(scenarios/las_fmnist_550.toml --set data.server_labeled=$labels --set data.train_pool_size=$pool "${prec[@]}"
         --set 'run.algorithms=["server_only"]' --set algorithms.server_only.server_epochs=10)
    sweep "${las[@]}" --set data.server_validation=$held --set budget.rounds=${LAS_TUNE_ROUNDS:-60} \
      --grid algorithms.server_only.lr=0.01,0.02,0.04 --seeds 2 --set seed=100 --out "$RUNS/las_floor10_tune_$labels"
    chosen=$($PY benchmarks/label_scarce_study.py choose --column val_accuracy "$RUNS/las_floor10_tune_$labels" | sed 's/^--set //')
    sweep "${las[@]}" --set "$chosen" --seeds "$SEEDS" --out "$RUNS/las_floor10_$labels"
  done
fi

if [ "$STAGE" = las_off ]; then
  prec=(); [ -n "${PRECISION:-}" ] && prec=(--set "train.precision=\"$PRECISION\"")
  for labels in ${LAS_LABELS:-100 250}; do
    chosen=$($PY benchmarks/label_scarce_study.py choose --column val_accuracy "$RUNS/las_tune_${labels}_fedmatch" | sed 's/^--set //')
    sweep scenarios/las_fmnist_550.toml --set data.server_labeled=$labels --set data.train_pool_size=$((55000 + labels)) \
      "${prec[@]}" --set 'run.algorithms=["fedmatch"]' --set "$chosen" --set algorithms.fedmatch.lambda_a=0.0 \
      --set algorithms.fedmatch.lambda_i=0.0 --seeds "$SEEDS" --out "$RUNS/las_off_$labels"
  done
fi
