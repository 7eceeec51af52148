#!/usr/bin/env bash
# The prepared GPU session (issue 8, section 4): one device call that installs the carried wheels and runs
# the speed benchmark on the GPU, rlbench beside SBX (both on the GPU), rows saved under $OUT as measured.
#
# Here, once:   bash scripts/device_wheels.sh                 (wheels + the peer script into .whl/)
# Device call:  run(command="bash scripts/gpu_bench.sh", carry=[".whl"], timeout_s=570)
# Locally (a dry run of the same steps on the CPU):  OUT=/tmp/gb DEVICE=cpu BUDGET_S=300 bash scripts/gpu_bench.sh
#
# Phases, in this order, each cut off by what is left of BUDGET_S (seconds, default 540) so that the call
# returns with its files before the device limit; PHASES="name ..." runs only those (default: all):
#   train          train.py --device gpu for 4000 steps, GPU memory sampled each second (no pre-allocation);
#   first_step     the time to the first gradient step of the four default cases, cold then warm
#                  compilation cache (issue 19), each in a fresh process;
#   float32        the four default cases, SBX beside each row;
#   bfloat16       SAC 8x8 and CrossQ in bfloat16;
#   cmdbuf         SAC 1x1 and 8x8 with XLA's CUDA-graph capture extended to loops and conditionals
#                  (--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL): the update alone is launch-bound
#                  on an H200 (0.72 ms for one SAC step), and lax.scan / lax.cond split the default capture;
#   float32_again  the float32 cases again, a second sample of the noise;
#   seeds_run      issue 16: a whole 10-seed, 100k-step SAC run on HalfCheetah-v4 (train.py --n-seeds 10,
#                  evaluations included), its wall time (target <= 5 minutes; SBX seed after seed: ~2 hours);
#   seeds          issue 16: K = 1, 8, 32, 128 vmapped seeds of SAC 1x1 and DroQ, aggregate and per-seed
#                  env-steps/s and peak device memory (target: K=32 SAC >= 10,000 aggregate env-steps/s).
#   sweep          issue 17: SAC HalfCheetah-v4, 32 seeds x 20k env steps, as python -m rlbench.sweep packs them
#                  on one GPU (8 vmapped seeds per process, 4 processes per GPU), against sequential runs (two
#                  timed, x16). Ray's wheel (79 MB) does not fit the device carry (64 MiB) and the device has
#                  no network, so where Ray is missing the same packing runs as 4 concurrent train.py --n-seeds 8.
#   device_loop    issue 36: SAC and CrossQ on brax:halfcheetah (positional backend) with the device loop, 10 seeds
#                  vmapped x 128 envs x 1M env steps each (gradient_steps 16 per vector step, batch 512), the wall
#                  time of each run (targets: >= 100,000 aggregate env-steps/s; 10 x 1M in under 15 minutes).
#   zoo_returns    issue 18: CrossQ, CrossQ + TQC (n_quantiles 25) and TQC on HalfCheetah-v4, 4 vmapped seeds x
#                  100k env steps each, the three runs at once on the GPU (evaluation every 10k, 5 episodes); each
#                  run's evaluations.npz and config.yml are copied under $OUT/zoo_returns/ at the end (also what a
#                  run cut short by the budget evaluated so far).
#   ppo            issue 45: device-loop PPO on brax:halfcheetah, 2048 envs x 10 vmapped seeds, unroll 20, 32
#                  minibatches, 8 epochs, beside Brax's own PPO trainer with the same settings and networks
#                  (benchmarks/brax_ppo_speed.py: aggregate env-steps/s; Brax's trainer runs one seed per run).
# Issue 45's call: run(command="PHASES='ppo' bash scripts/gpu_bench.sh", carry=[".whl"], timeout_s=590).
# Issue 36's call: run(command="PHASES='device_loop' bash scripts/gpu_bench.sh", carry=[".whl"], timeout_s=590).
# Issue 18's call: run(command="PHASES='zoo_returns' bash scripts/gpu_bench.sh", carry=[".whl"], timeout_s=590).
# Issue 17's call: run(command="PHASES='sweep' bash scripts/gpu_bench.sh", carry=[".whl"]).
# Issue 16's call: run(command="PHASES='seeds_run seeds first_step' bash scripts/gpu_bench.sh", carry=[".whl"]).
# Figures of the first session that ran it (2026-11-30): benchmarks/README.md and benchmarks/gpu_h200/.
set -uo pipefail
out=${OUT:-/tmp/rlbench_gpu_bench}
device=${DEVICE:-gpu}
budget=${BUDGET_S:-540}
start=$SECONDS
mkdir -p "$out"
exec > >(tee -a "$out/gpu_bench.log") 2>&1

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi"
  nproc
  python3 -c "import jax, flax, optax, gymnasium, mujoco; print('jax', jax.__version__, jax.devices(), \
'flax', flax.__version__, 'optax', optax.__version__, 'gymnasium', gymnasium.__version__, 'mujoco', mujoco.__version__)"
} | tee "$out/machine.txt"

left() { echo $((budget - (SECONDS - start))); }
wanted() { [[ " ${PHASES:-all} " == *" all "* || " ${PHASES:-all} " == *" $1 "* ]]; }
phase() {  # phase NAME ARGS...: the speed benchmark, stopped when the budget runs out
  local name=$1 s
  shift
  wanted "$name" || return 0
  s=$(left)
  if ((s < 60)); then echo "skipped $name: ${s}s left"; return; fi
  echo "== $name (up to ${s}s)"
  timeout "$s" python3 -m rlbench.bench speed --device "$device" --output "$out/speed_${name}.jsonl" "$@"
  echo "== $name: exit $? after $((SECONDS - start))s in all"
}
# train.py itself on the GPU: --device gpu selects it, and the sampled memory shows JAX did not
# pre-allocate the card (XLA's default would take 75% of it, about 100 GiB on an H200).
if [[ $device == gpu ]] && wanted train; then
  echo "== train.py --device gpu"
  (while sleep 1; do nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader; done) >"$out/gpu_mem.csv" 2>/dev/null &
  sampler=$!
  timeout 150 python3 train.py --algo sac --env HalfCheetah-v4 -n 4000 --device gpu -f /tmp/gpu_train \
    --eval-freq 2000 --eval-episodes 2 -params learning_starts:1000  # prints "Replay buffer: ... on gpu"
  echo "== train.py: exit $? after $((SECONDS - start))s in all; peak GPU memory used (MiB):" \
    "$(cut -d, -f1 "$out/gpu_mem.csv" | tr -dc '0-9\n' | sort -n | tail -1)"
  kill "$sampler"
fi
peer=(--peer "$(command -v python3)" --peer-script .whl/sbx_speed.py --peer-device "$device")
phase first_step --first-step
phase float32 --precision float32 "${peer[@]}"
phase bfloat16 --precision bfloat16 --case sac 8 8 4000 --case crossq 1 1 1000
XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" \
  phase cmdbuf --precision float32 --case sac 1 1 3000 --case sac 8 8 4000
phase float32_again --precision float32 "${peer[@]}"
if wanted seeds_run; then
  s=$(left)
  if ((s < 120)); then
    echo "skipped seeds_run: ${s}s left"
  else
    echo "== seeds_run: train.py --n-seeds 10 -n 100000 (up to $((s - 60))s)"
    run_start=$SECONDS
    timeout $((s - 60)) python3 train.py --algo sac --env HalfCheetah-v4 --seed 1 --n-seeds 10 -n 100000 \
      --device "$device" -f /tmp/gpu_seeds --eval-freq 10000 --eval-episodes 5 --verbose 1 >"$out/seeds_run.log" 2>&1
    code=$?
    echo "== seeds_run: exit $code, wall $((SECONDS - run_start))s; last evaluation:" \
      "$(grep '^Eval' "$out/seeds_run.log" | tail -1)" | tee -a "$out/seeds_run.log"
  fi
fi
phase seeds --n-seeds 1 8 32 128 --packing vmapped --case sac 1 1 3000 --case droq 1 20 300
if wanted sweep; then
  s=$(left)
  if ((s < 180)); then
    echo "skipped sweep: ${s}s left"
  else
    grid=(-n 20000 --eval-freq 20000 --eval-episodes 1 -params learning_starts:1000)
    sweep_start=$SECONDS
    if python3 -c "import ray" 2>/dev/null; then
      echo "== sweep: python -m rlbench.sweep, 32 seeds, automatic packing (up to $((s / 2))s)"
      timeout $((s / 2)) python3 -m rlbench.sweep --algos sac --envs HalfCheetah-v4 --seeds 32 "${grid[@]}" \
        -f /tmp/gpu_sweep --name gpu32 --no-report >"$out/sweep.log" 2>&1
    else
      echo "== sweep: no Ray here; the sweep's packing by hand: 4 x train.py --n-seeds 8 at once (up to $((s / 2))s)"
      for first in 1 9 17 25; do
        XLA_PYTHON_CLIENT_MEM_FRACTION=0.23 timeout $((s / 2)) python3 train.py --algo sac --env HalfCheetah-v4 \
          --seed $first --n-seeds 8 "${grid[@]}" --device "$device" -f /tmp/gpu_sweep --verbose 0 \
          >"$out/sweep_$first.log" 2>&1 &
      done
      wait
    fi
    echo "== sweep: 32 seeds in $((SECONDS - sweep_start))s"
    one_start=$SECONDS
    for seed in 1 2; do
      timeout $(($(left) - 30)) python3 train.py --algo sac --env HalfCheetah-v4 --seed $seed "${grid[@]}" \
        --device "$device" -f /tmp/gpu_sequential --verbose 0 >>"$out/sweep_sequential.log" 2>&1
    done
    echo "== sweep: 2 sequential runs in $((SECONDS - one_start))s (32 sequential: x16)"
  fi
fi
if wanted device_loop; then
  for algo in sac crossq; do
    s=$(left)
    if ((s < 120)); then echo "skipped device_loop $algo: ${s}s left"; continue; fi
    echo "== device_loop: $algo, brax:halfcheetah, 10 seeds x 128 envs x 1M env steps (up to $((s - 30))s)"
    run_start=$SECONDS
    timeout $((s - 30)) python3 train.py --algo "$algo" --env brax:halfcheetah --env-kwargs "backend:'positional'" \
      --seed 1 --n-seeds 10 -n 1000000 --device "$device" -f /tmp/gpu_device_loop --eval-freq 250000 \
      --eval-episodes 2 --verbose 1 -params n_envs:128 train_freq:1 gradient_steps:16 batch_size:512 \
      learning_starts:8192 "policy_kwargs:dict(net_arch=[256, 256])" >"$out/device_loop_$algo.log" 2>&1
    code=$?
    wall=$((SECONDS - run_start))
    echo "== device_loop $algo: exit $code, wall ${wall}s for 10 x 1M env steps" \
      "(aggregate $((10000000 / (wall > 0 ? wall : 1))) env-steps/s with compilation);" \
      "last evaluation: $(grep '^Eval' "$out/device_loop_$algo.log" | tail -1)" | tee -a "$out/device_loop_$algo.log"
  done
fi
if wanted zoo_returns; then
  s=$(left)
  if ((s < 180)); then
    echo "skipped zoo_returns: ${s}s left"
  else
    echo "== zoo_returns: crossq, crossq + tqc, tqc; 4 seeds x 100k each, at once (up to $((s - 30))s)"
    zoo=(--env HalfCheetah-v4 --seed 1 --n-seeds 4 -n 100000 --eval-freq 10000 --eval-episodes 5 --verbose 0)
    zoo+=(--device "$device")
    crossq_nets="net_arch=dict(pi=[256, 256], qf=[2048, 2048])"  # hyperparams/crossq.yml's, for both CrossQ runs
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 timeout $((s - 30)) python3 train.py --algo crossq "${zoo[@]}" \
      -f /tmp/gpu_zoo/crossq -params learning_starts:5000 >"$out/zoo_crossq.log" 2>&1 &
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 timeout $((s - 30)) python3 train.py --algo crossq "${zoo[@]}" \
      -f /tmp/gpu_zoo/crossq_tqc -params learning_starts:5000 "policy_kwargs:dict($crossq_nets, n_quantiles=25)" \
      top_quantiles_to_drop_per_net:2 >"$out/zoo_crossq_tqc.log" 2>&1 &
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 timeout $((s - 30)) python3 train.py --algo tqc "${zoo[@]}" \
      -f /tmp/gpu_zoo/tqc -params learning_starts:5000 >"$out/zoo_tqc.log" 2>&1 &
    wait
    for run in /tmp/gpu_zoo/*/*/HalfCheetah-v4_*; do  # <setting>/<algo>/<env>_<n>
      to="$out/zoo_returns/$(basename "$(dirname "$(dirname "$run")")")_$(basename "$run")"
      mkdir -p "$to" && cp "$run"/evaluations.npz "$run"/HalfCheetah-v4/config.yml "$to"/ 2>/dev/null
    done
    echo "== zoo_returns: done after $((SECONDS - start))s in all"
  fi
fi
if wanted ppo; then
  s=$(left)
  if ((s < 150)); then
    echo "skipped ppo: ${s}s left"
  else
    echo "== ppo: rlbench device loop (10 seeds vmapped) beside Brax's PPO trainer, brax:halfcheetah (up to $((s - 20))s)"
    timeout $((s - 20)) python3 benchmarks/brax_ppo_speed.py --env halfcheetah --envs 2048 --unroll 20 \
      --minibatches 32 --epochs 8 --n-seeds 10 --steps 2000000 --rounds 1 >"$out/ppo_brax.jsonl" 2>"$out/ppo_brax.log"
    echo "== ppo: exit $? after $((SECONDS - start))s in all"
    cat "$out/ppo_brax.jsonl"
  fi
fi
ls -l "$out"
