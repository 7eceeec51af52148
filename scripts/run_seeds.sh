#!/usr/bin/env bash
# Sweep envs x seeds, one train.py process per run; extra flags pass through to train.py.
#   envs="Hopper-v4 Walker2d-v4" seeds="1 2 3" ./scripts/run_seeds.sh --algo crossq -n 100000
# Runs one after another (each uses every core); a failed run does not stop the sweep. Exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
envs=${envs:-Pendulum-v1}
seeds=${seeds:-"1 2 3"}
python=${PYTHON:-python}
finished=()
failed=()
for env in $envs; do
  for seed in $seeds; do
    echo "=== $env seed $seed: $python train.py --env $env --seed $seed $*"
    if "$python" train.py --env "$env" --seed "$seed" "$@"; then
      finished+=("$env/$seed")
    else
      failed+=("$env/$seed (exit $?)")
    fi
  done
done
echo "=== finished ${#finished[@]}: ${finished[*]:-}"
echo "=== failed ${#failed[@]}: ${failed[*]:-}"
[ ${#failed[@]} -eq 0 ]
