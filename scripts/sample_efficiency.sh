#!/usr/bin/env bash
# CrossQ vs SAC on HalfCheetah-v4 at equal env steps (issue: sample efficiency, 2 seeds, 30k steps).
# Usage: bash scripts/sample_efficiency.sh [LOG_FOLDER] [N_TIMESTEPS]
set -euo pipefail
log=${1:-logs/sample_efficiency}
steps=${2:-30000}
common=(--env HalfCheetah-v4 -n "$steps" --eval-freq 5000 --eval-episodes 5 --verbose 0 -f "$log")
for seed in 1 2; do
  /usr/bin/time -f "crossq seed $seed: %e s" python train.py --algo crossq --seed "$seed" "${common[@]}" \
    -params "policy_kwargs:dict(net_arch=dict(pi=[256, 256], qf=[1024, 1024]))"
done
for seed in 1 2; do
  # The same 5000 random warm-up steps as CrossQ's entry, so both curves start learning together.
  /usr/bin/time -f "sac seed $seed: %e s" python train.py --algo sac --seed "$seed" "${common[@]}" -params learning_starts:5000
done
python -m rlbench.report.plots "$log" -o "$log/plots"
