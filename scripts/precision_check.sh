#!/usr/bin/env bash
# bfloat16 vs float32 at equal env steps (issue: mixed precision). Same settings as
# scripts/sample_efficiency.sh for HalfCheetah-v4 (so its float32 runs are the reference), and the
# hyperparameter files' entries for Pendulum-v1, 2 seeds each.
# Usage: bash scripts/precision_check.sh [LOG_FOLDER] [HALF_CHEETAH_STEPS] [HALF_CHEETAH_PRECISIONS...]
# (Pendulum-v1 always runs both precisions; HalfCheetah-v4 the ones given, by default both.)
set -euo pipefail
log=${1:-logs/precision}
steps=${2:-30000}
precisions=("${@:3}")
(( ${#precisions[@]} )) || precisions=(bfloat16 float32)
for precision in bfloat16 float32; do
  for algo in sac crossq; do
    for seed in 1 2; do
      /usr/bin/time -f "$algo Pendulum-v1 $precision seed $seed: %e s" python train.py --algo "$algo" \
        --env Pendulum-v1 --seed "$seed" -n 10000 --eval-freq 2000 --eval-episodes 5 --verbose 0 \
        -f "$log/$precision" -params "precision:$precision"
    done
  done
done
common=(--env HalfCheetah-v4 -n "$steps" --eval-freq 5000 --eval-episodes 5 --verbose 0)
for precision in "${precisions[@]}"; do
  for seed in 1 2; do
    /usr/bin/time -f "sac HalfCheetah-v4 $precision seed $seed: %e s" python train.py --algo sac --seed "$seed" \
      "${common[@]}" -f "$log/$precision" -params learning_starts:5000 "precision:$precision"
  done
  for seed in 1 2; do
    /usr/bin/time -f "crossq HalfCheetah-v4 $precision seed $seed: %e s" python train.py --algo crossq \
      --seed "$seed" "${common[@]}" -f "$log/$precision" \
      -params "policy_kwargs:dict(net_arch=dict(pi=[256, 256], qf=[1024, 1024]))" "precision:$precision"
  done
done
for precision in bfloat16 float32; do
  python -m rlbench.plots "$log/$precision" -o "$log/$precision/plots"
done
