#!/usr/bin/env bash
# Sweep envs x seeds; the flags are train.py's.
#   envs="Hopper-v4 Walker2d-v4" seeds="1 2 3" ./scripts/run_seeds.sh --algo crossq -n 100000
#   jobs=2 seeds="1 2 3 4" ./scripts/run_seeds.sh --algo sac -n 100000     (two runs at a time)
#   seeds_per_run=4 seeds="1 2 3 4" ./scripts/run_seeds.sh --algo sac -n 100000   (one run, 4 vmapped seeds)
# engine=auto (default): the sweep engine (python -m rlbench.sweep, on Ray) when Ray is installed, else the
#   bash loop below; engine=sweep insists on the sweep (exit 2 with the install command without Ray);
#   engine=bash always runs the loop.
# The sweep: the same grid as `python -m rlbench.sweep --algos <algo> --envs $envs --seed-list $seeds ...`, with
#   its manifest in <-f>/sweeps/<name>/ (name=NAME, default <algo>_<envs>): the same command again skips the
#   finished runs and continues interrupted ones (Ctrl-C: exit 75), another seed list needs another name=, and
#   it ends with a returns report there. It maps --algo, -n, -params, -f, --eval-freq, --eval-episodes, -conf,
#   --device, --save-freq and the W&B flags (--track, --wandb-project-name, --wandb-entity, -tags); jobs=N
#   becomes --cpus-per-run cores/N (N runs at once on this machine, each pinned to its own cores; N must divide
#   the cores, or exceed them), seeds_per_run=K --seeds-per-process K. Any other flag exits 2 naming it: use
#   engine=bash for it. Each run's output goes to <-f>/sweeps/<name>/logs/.
# The bash loop (engine=bash, or no Ray): one train.py process per run; every flag passes through to train.py.
# jobs=1 (default): runs one after another, each using every core, output to the terminal.
# jobs=N: N runs at a time, each pinned (taskset) to its own share of the cores. Unpinned JAX processes
#   fight over the cores (two on this 2-core VM spent half their CPU time in the kernel); pinned to one
#   core each, a SAC run made 107-118 env-steps/s, about what one run alone makes on both cores.
#   Each run's output goes to $sweep_logs/<env>_seed<seed>.log (default logs/sweeps).
# seeds_per_run=K: each run trains K consecutive seeds as one vmapped learner (train.py --n-seeds K), each
#   seed in its own run folder. On a GPU that packs K seeds for about the price of one; on a CPU processes
#   pinned one per core (jobs=N) are faster (benchmarks/README.md, "Many seeds in one process").
# A failed run does not stop the sweep. Exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
envs=${envs:-Pendulum-v1}
seeds=${seeds:-"1 2 3"}
jobs=${jobs:-1}
seeds_per_run=${seeds_per_run:-1}
sweep_logs=${sweep_logs:-logs/sweeps}
engine=${engine:-auto}
python=${PYTHON:-python}

case $engine in
  auto | sweep | bash) ;;
  *)
    echo "engine=$engine: expected auto (the sweep when Ray is installed, else the bash loop), sweep or bash" >&2
    exit 2
    ;;
esac

if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "jobs=$jobs: expected a positive integer (runs at a time)" >&2
  exit 2
fi
if ! [[ $seeds_per_run =~ ^[1-9][0-9]*$ ]]; then
  echo "seeds_per_run=$seeds_per_run: expected a positive integer (seeds per train.py run)" >&2
  exit 2
fi
read -ra seed_list <<<"$seeds"
if ((${#seed_list[@]} % seeds_per_run)); then
  echo "seeds_per_run=$seeds_per_run: the ${#seed_list[@]} seeds ($seeds) do not split into runs of $seeds_per_run" >&2
  exit 2
fi
starts=()  # each run's first seed; with seeds_per_run=K it trains seeds first .. first+K-1
for ((i = 0; i < ${#seed_list[@]}; i += seeds_per_run)); do
  for ((j = 1; j < seeds_per_run; j++)); do
    if ((seed_list[i + j] != seed_list[i] + j)); then
      echo "seeds_per_run=$seeds_per_run: seeds ${seed_list[*]:i:seeds_per_run} are not consecutive" >&2
      exit 2
    fi
  done
  starts+=("${seed_list[i]}")
done

# The sweep engine: the same grid as one `python -m rlbench.sweep` (its flags from train.py's, or exit 2).
if [[ $engine == sweep ]] || { [[ $engine == auto ]] && "$python" -c "import ray" 2>/dev/null; }; then
  read -ra env_list <<<"$envs"
  sweep=(--envs "${env_list[@]}" --seed-list "${seed_list[@]}" --seeds-per-process "$seeds_per_run")
  [[ -n ${name:-} ]] && sweep+=(--name "$name")
  cores=$(nproc)
  if ((jobs > cores)); then  # a fraction of a core each, unpinned (as the loop's shared slots)
    sweep+=(--cpus-per-run "$(awk -v c="$cores" -v j="$jobs" 'BEGIN { printf "%.4f", int(c / j * 10000) / 10000 }')")
  elif ((cores % jobs)); then
    echo "jobs=$jobs: the sweep gives each run whole cores, and $jobs does not divide the $cores cores;" \
      "use a divisor of $cores, or engine=bash" >&2
    exit 2
  else
    sweep+=(--cpus-per-run "$((cores / jobs))")
  fi
  while (($#)); do
    [[ $1 == --*=* ]] && set -- "${1%%=*}" "${1#*=}" "${@:2}"
    case $1 in
      --algo) sweep+=(--algos "${@:2:1}") ;;
      -n | --n-timesteps | -f | --log-folder | --eval-freq | --eval-episodes | -conf | --conf-file | --device | \
        --save-freq | --wandb-project-name | --wandb-entity) sweep+=("${@:1:2}") ;;
      -params | --hyperparams | -tags | --wandb-tags | --track)  # their values: up to the next flag
        sweep+=("$1")
        while (($# > 1)) && [[ $2 != -* ]]; do
          sweep+=("$2")
          shift
        done
        shift
        continue
        ;;
      *)
        echo "$1: not a flag the sweep engine maps (run_seeds.sh's header lists them); run it with" \
          "engine=bash ./scripts/run_seeds.sh ... (one train.py per run), or drop the flag" >&2
        exit 2
        ;;
    esac
    shift
    (($#)) && shift
  done
  echo "=== $python -m rlbench.sweep ${sweep[*]}"
  exec "$python" -m rlbench.sweep "${sweep[@]}"
fi

runs=()
for env in $envs; do
  for seed in "${starts[@]}"; do runs+=("$env $seed"); done
done
per_run=()
((seeds_per_run > 1)) && per_run=(--n-seeds "$seeds_per_run")

prefix=()  # what each run starts under: taskset in a parallel slot
run_one() {  # run_one ENV SEED RESULTS: one train.py run; appends "ok ENV/SEED" or "failed ENV/SEED (exit N)"
  if "${prefix[@]}" "$python" train.py --env "$1" --seed "$2" "${per_run[@]}" "${@:4}"; then
    echo "ok $1/$2" >>"$3"
  else
    echo "failed $1/$2 (exit $?)" >>"$3"
  fi
}

results=$(mktemp)
trap 'rm -f "$results" "$results".*' EXIT
if ((jobs == 1)); then
  for run in "${runs[@]}"; do
    read -r env seed <<<"$run"
    echo "=== $env seed $seed: $python train.py --env $env --seed $seed ${per_run[*]} $*"
    run_one "$env" "$seed" "$results" "$@"
  done
else
  cores=$(nproc)
  ((jobs > cores)) && echo "=== jobs=$jobs > $cores cores: slots share cores (slower than jobs=$cores)" >&2
  taskset=$(command -v taskset) || echo "=== taskset not found: runs are not pinned" >&2
  mkdir -p "$sweep_logs"
  for ((slot = 0; slot < jobs; slot++)); do
    # Slot k takes cores [k*C/N, (k+1)*C/N) (at least one, wrapping when N > C) and every N-th run.
    first=$((slot * cores / jobs % cores))
    last=$((((slot + 1) * cores / jobs - 1) % cores))
    ((last < first)) && last=$first
    prefix=()
    [[ -n $taskset ]] && prefix=("$taskset" -c "$first-$last")
    (
      for ((i = slot; i < ${#runs[@]}; i += jobs)); do
        read -r env seed <<<"${runs[i]}"
        log="$sweep_logs/${env}_seed${seed}.log"
        echo "=== $env seed $seed on cores $first-$last: $python train.py --env $env --seed $seed ${per_run[*]} $* > $log"
        run_one "$env" "$seed" "$results.$slot" "$@" >"$log" 2>&1
        echo "=== $env seed $seed: $(tail -n 1 "$results.$slot")"
      done
    ) &
  done
  wait
  cat "$results".* >>"$results" 2>/dev/null
fi

mapfile -t finished < <(sed -n 's/^ok //p' "$results")
mapfile -t failed < <(sed -n 's/^failed //p' "$results")
echo "=== finished ${#finished[@]}: ${finished[*]:-}"
echo "=== failed ${#failed[@]}: ${failed[*]:-}"
[ ${#failed[@]} -eq 0 ]
