#!/usr/bin/env bash
# bfloat16 vs float32 returns at equal env steps (issue: mixed precision), 2 seeds each, as
# `python -m rlbench.bench returns` grids with one report per precision under benchmarks/precision/:
#   Pendulum-v1, SAC and CrossQ, 10k steps (the hyperparameter files' entries), both precisions;
#   HalfCheetah-v4, 30k steps, with scripts/sample_efficiency.sh's settings (SAC with 5000 random
#   warm-up steps; CrossQ with critic [1024, 1024]), for the precisions given (default: both).
# Usage: bash scripts/precision_check.sh [LOG_FOLDER] [HALF_CHEETAH_STEPS] [HALF_CHEETAH_PRECISIONS...]
set -euo pipefail
log=${1:-logs/precision}
steps=${2:-30000}
precisions=("${@:3}")
(( ${#precisions[@]} )) || precisions=(bfloat16 float32)
out=benchmarks/precision
for precision in bfloat16 float32; do
  python -m rlbench.bench returns --algos sac crossq --envs Pendulum-v1 --seeds 2 -n 10000 --eval-freq 2000 \
    --at-steps 5000 -f "$log/pendulum_$precision" --output "$out/pendulum_$precision.md" \
    -params "precision:$precision"
done
for precision in "${precisions[@]}"; do
  python -m rlbench.bench returns --algos sac --envs HalfCheetah-v4 --seeds 2 -n "$steps" --eval-freq 5000 \
    --at-steps 20000 -f "$log/halfcheetah_sac_$precision" --output "$out/halfcheetah_sac_$precision.md" \
    -params learning_starts:5000 "precision:$precision"
  python -m rlbench.bench returns --algos crossq --envs HalfCheetah-v4 --seeds 2 -n "$steps" --eval-freq 5000 \
    --at-steps 20000 -f "$log/halfcheetah_crossq_$precision" --output "$out/halfcheetah_crossq_$precision.md" \
    -params "policy_kwargs:dict(net_arch=dict(pi=[256, 256], qf=[1024, 1024]))" "precision:$precision"
done
