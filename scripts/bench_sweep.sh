#!/usr/bin/env bash
# Issue 17's benchmark: the wall time of one grid (SAC, HalfCheetah-v4, 4 seeds, 20k env steps each) run
# four ways in one invocation, on an otherwise idle machine:
#   sweep       python -m rlbench.sweep, packing chosen automatically (on CPUs: one pinned process per core);
#   sequential  train.py four times, one after another (each unpinned, on every core);
#   run_seeds   scripts/run_seeds.sh engine=bash jobs=2 (the bash loop: two runs at a time, taskset-pinned);
#   sbx         SBX's SAC (the peer, ../shared/bench/sbx_speed.py), four runs two at a time, taskset-pinned.
# Every rlbench run uses learning_starts 1000 (SBX's), and evaluates once, at the end (1 episode): SBX's
# rows train the same 20k steps and gradient steps but evaluate nothing. One JSON line per way, with the
# machine's CPU flags, goes to $OUTPUT (default benchmarks/sweep_<date>_cpu.jsonl).
#
#   bash scripts/bench_sweep.sh                      (about 30 minutes on 2 cores)
#   STEPS=2000 SEEDS=2 bash scripts/bench_sweep.sh   (a quick check of the script)
set -uo pipefail
cd "$(dirname "$0")/.."
steps=${STEPS:-20000}
seeds=${SEEDS:-4}
env_id=${ENV_ID:-HalfCheetah-v4}
python=${PYTHON:-python}
sbx_python=${SBX_PYTHON:-/tmp/sbx-venv/bin/python}
sbx_script=${SBX_SCRIPT:-../shared/bench/sbx_speed.py}
output=${OUTPUT:-benchmarks/sweep_$(date -u +%Y-%m-%d)_cpu.jsonl}
work=$(mktemp -d /tmp/bench_sweep.XXXXXX)
trap 'rm -rf "$work"' EXIT
common=(-n "$steps" --eval-freq "$steps" --eval-episodes 1 -params learning_starts:1000)

flags=$(grep -o -w 'avx512_bf16\|amx_bf16\|avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
row() {  # row WAY WALL_S NOTE
  printf '{"way": "%s", "wall_s": %s, "runs": %s, "env_steps_per_run": %s, "env": "%s", "algo": "sac", "note": "%s", "cpu": "%s", "cores": %s, "cpu_flags": "%s", "date": "%s"}\n' \
    "$1" "$2" "$seeds" "$steps" "$env_id" "$3" "$cpu" "$(nproc)" "${flags% }" "$(date -u +%FT%TZ)" | tee -a "$output"
}
timed() {  # timed COMMAND...: run it, print its wall time in seconds, or null if it failed
  local begin end log="$work/$RANDOM.log"
  begin=$(date +%s.%N)
  "$@" >"$log" 2>&1
  local status=$?
  if ((status)); then  # a failed way is no figure: null, and its output kept outside $work
    local kept
    kept=$(mktemp /tmp/bench_sweep_failed.XXXXXX)
    cp "$log" "$kept"
    echo "error: exit $status from: $*; its output: $kept" >&2
    echo null
    return
  fi
  end=$(date +%s.%N)
  python3 -c "print(round($end - $begin, 1))"
}
mkdir -p "$(dirname "$output")"
echo "== $seeds x SAC $env_id, $steps env steps each; $cpu, $(nproc) cores, flags: $flags -> $output"

echo "== sweep (automatic packing)"
row sweep "$(timed "$python" -m rlbench.sweep --algos sac --envs "$env_id" --seeds "$seeds" "${common[@]}" \
  -f "$work/sweep" --name bench --no-report)" "python -m rlbench.sweep, automatic packing (checkpoints every 10%)"

echo "== sequential"
sequential() {
  for ((seed = 1; seed <= seeds; seed++)); do
    "$python" train.py --algo sac --env "$env_id" --seed "$seed" "${common[@]}" -f "$work/seq" --verbose 0 || return
  done
}
row sequential "$(timed sequential)" "train.py one after another, unpinned"

echo "== run_seeds.sh engine=bash jobs=2"
row run_seeds "$(timed env engine=bash jobs=2 seeds="$(seq -s ' ' 1 "$seeds")" envs="$env_id" \
  sweep_logs="$work/run_seeds_logs" ./scripts/run_seeds.sh --algo sac "${common[@]}" -f "$work/run_seeds")" \
  "scripts/run_seeds.sh engine=bash jobs=2 (taskset-pinned bash loop)"

echo "== sbx, two at a time"
sbx_pair() {  # runs 1..seeds, two at a time, one per core
  local pids=() slot
  for ((seed = 1; seed <= seeds; seed++)); do
    slot=$(((seed - 1) % 2))
    taskset -c "$slot" "$sbx_python" "$sbx_script" --algo sac --env "$env_id" --steps $((steps - 1100)) &
    pids+=($!)
    if ((${#pids[@]} == 2)); then wait "${pids[@]}"; pids=(); fi
  done
  wait "${pids[@]}" 2>/dev/null
}
if [[ -x $sbx_python && -f $sbx_script ]]; then
  row sbx "$(timed sbx_pair)" "SBX 0.28 SAC, 2 taskset-pinned at a time, no evaluation"
else
  echo "skipped sbx: $sbx_python or $sbx_script missing (see ../shared/bench/README.md)"
fi
