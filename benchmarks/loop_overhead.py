"""Where the training loop's host time goes, per env step, at 1 env x 1 gradient step (issue 33 item 7).

    python benchmarks/loop_overhead.py --algo sac tqc --steps 2000

For each algorithm (HalfCheetah-v4, float32, the settings of `python -m rlbench.bench speed`):

1. `loop`: the whole training loop, ms per env step in steady state, timed as `bench speed` times it (the
   real `train_seeds`, between two `on_iteration` calls 2000 steps apart);
2. `update alone`: the compiled update on fixed batches (bench speed's `update_only_rate`), ms per step;
3. the pieces of one env step, each timed in isolation the way the loop calls it, on the loop's own
   objects (the vector env, the compiled entry points, the host state): best of 5 rounds of `--steps`
   calls each (the VM is shared and noisy: the best round is the one least disturbed).

`loop - update alone` is the host overhead; the pieces say where it goes. A piece that the loop runs while
the device computes (after dispatching the update) costs wall time only when the host is the slower of
the two: the table marks those `overlapped`. The dispatch row is the time for the jitted call to return
(arguments flattened and handed over, outputs created), not the computation, which runs on afterwards.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.bench.row import bench_config, random_batches, rlbench_row
from rlbench.config.registry import ALGORITHMS
from rlbench.envs.make import env_spec, final_observations, make_single_env, make_vector_env, step_vector_env
from rlbench.loop import compiled
from rlbench.loop.divergence_guard import DivergenceGuard
from rlbench.loop.saving import new_host_state

ENV_ID = "HalfCheetah-v4"


def cpu_flags() -> str:
    """The CPU flags that decide the matrix-multiply paths (bfloat16, AMX), from /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return f"flags: unknown ({platform.machine()})"
    flags = set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split())
    wanted = ["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"]
    model = re.search(r"^model name\s*:(.*)$", text, re.M)
    return f"cpu: {model.group(1).strip() if model else '?'}; flags: " + " ".join(
        f"{flag}={'yes' if flag in flags else 'no'}" for flag in wanted
    )


def best_ms(fn: Callable[[], object], n: int, rounds: int = 5) -> float:
    """ms per call of `fn`: the best of `rounds` rounds of `n` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e3


def env_rows(n: int) -> dict[str, float]:
    """The env step, layer by layer: MuJoCo's HalfCheetah itself, gym.make's wrappers, rlbench's single
    env (RescaleAction, EpisodeRecorder), the vector env as the loop steps it (SyncVectorEnv, SAME_STEP)."""
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (n, 6)).astype(np.float32)
    rows = {}
    single = make_single_env(ENV_ID, {}, record_episodes=True)
    single.reset(seed=0)
    raw = single.unwrapped
    for name, step in (("env: MuJoCo HalfCheetah (unwrapped)", raw.step), ("env: rlbench's single env", single.step)):
        i = iter(range(10**9))
        rows[name] = best_ms(lambda step=step, i=i: step(actions[next(i) % n]), n)
        single.reset(seed=0)
    vector = make_vector_env(ENV_ID, 1, "dummy", {}, record_episodes=True)
    vector.reset(seed=0)
    i = iter(range(10**9))
    rows["env: vector env step (as the loop)"] = best_ms(lambda: step_vector_env(vector, actions[next(i) % n][None]), n)
    single.close()
    vector.close()
    return rows


def loop_rows(algo: str, n: int) -> dict[str, float]:
    """The loop's other pieces, on its own objects, each called as the loop calls it."""
    cfg = bench_config(algo, 1, [256, 256])
    env = make_vector_env(ENV_ID, 1, "dummy", {}, record_episodes=True)
    spec = env_spec(env)
    programs = compiled.entry_points(ALGORITHMS[algo], cfg, spec, 1)
    axis = programs.axis
    keys = jax.random.split(jax.random.key(0))
    state, buffer_state = programs.init(keys[0]), programs.init_buffers()
    obs = env.reset(seed=0)[0][None]
    host = new_host_state([0], obs, keys[1], spec, cfg.learning_starts, cfg.train_freq, None)
    action = np.zeros((1, 1, 6), np.float32)
    next_obs, reward, terminated, truncated, infos = env.step(action[0])
    done = terminated | truncated
    rows = {}

    def stage():
        real_next_obs = final_observations(next_obs, infos, done)
        host.pending.add(host.obs, action, reward[None], real_next_obs[None], terminated[None], truncated[None])
        return axis.device(host.pending.take())

    rows["stage: final obs, pending.add, take (copies)"] = best_ms(stage, n)
    batch = stage()
    training = None  # one seed
    carry = compiled.Carry(state, buffer_state)

    def update(program=programs.update):  # as rlbench.loop.updating calls it
        nonlocal carry
        inputs = compiled.IterationInputs(batch, np.float32(0.9), axis.device(host.obs), host.act_key, None, training)
        carry, out = program(carry, inputs)
        host.act_key = out.act_key
        return out

    out = update()
    jax.block_until_ready(out)
    rows.update(update_rows(update, lambda: carry, programs, cfg, spec, n))
    after_update = []
    for _ in range(max(n // 5, 1)):  # the env step as the loop meets it: an update just streamed the state
        axis.host(update().action)
        start = time.perf_counter()
        step_vector_env(env, action[0])
        after_update.append(time.perf_counter() - start)
    rows["env: vector env step right after an update (median)"] = float(np.median(after_update)) * 1e3
    out = update()
    ready = out.action
    rows["transfer: action device -> numpy"] = best_ms(lambda: axis.host(ready), n)
    rows["transfer: obs numpy -> device"] = best_ms(lambda: jax.device_put(host.obs[0]).block_until_ready(), n)
    rows.update(dispatch_rows(carry.state, n))
    rows.update(bookkeeping_rows(host, reward, done, n))
    guard = DivergenceGuard(axis)
    guard.start(0, carry.state, out.metrics)
    rows["finite: np.isfinite(action) every step"] = best_ms(lambda: np.isfinite(action).all(), n)
    check_ms = best_ms(lambda: guard.check(1, carry.state, out.metrics, host.active), max(n // 20, 5))
    rows["finite: DivergenceGuard.check (one call; at log/eval/save)"] = check_ms
    env.close()
    return rows


def update_rows(update, carry_now, programs, cfg, spec, n: int) -> dict[str, float]:
    """The fused iteration as the loop dispatches it: how long its call takes to return and how much of
    that the calling thread spends computing (thread CPU time); the same call signature on a trivial
    program (what the ~180 arrays in and out cost alone); and, interleaved round by round so that both
    see the same machine, the whole iteration blocked on against the gradient step alone on a fixed
    batch (what `bench speed`'s update-only rate times: no buffer insert or sample, no act)."""
    dispatch, thread_cpu = [], []
    for _ in range(n):
        start, cpu = time.perf_counter(), time.thread_time()
        out = update()
        dispatch.append(time.perf_counter() - start)
        thread_cpu.append(time.thread_time() - cpu)
        jax.block_until_ready((out, carry_now()))
    metric_shapes, action_shape = jax.eval_shape(lambda: (out.metrics, out.action))

    def same_signature(carry, inputs):  # nothing computed: what passing the arrays costs
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), (metric_shapes, action_shape))
        return carry, compiled.IterationOutputs(*zeros, inputs.act_key)

    trivial = jax.jit(same_signature, donate_argnums=0)
    returns = []
    for _ in range(n):
        start = time.perf_counter()
        out = update(trivial)
        returns.append(time.perf_counter() - start)
        jax.block_until_ready((out, carry_now()))
    steps = jax.jit(programs.learner.gradient_steps_fn, donate_argnums=0)
    batches = random_batches(spec, 1, cfg.batch_size)
    state = [programs.init(jax.random.key(1))]
    step_keys = jax.random.split(jax.random.key(2), 1)

    def gradient_step():
        state[0], _ = steps(state[0], batches, step_keys, jnp.float32(0.9), jnp.int32(0))
        jax.block_until_ready(state[0])

    def fused():
        jax.block_until_ready((update(), carry_now()))

    gradient_step()
    fused_ms, alone_ms = float("inf"), float("inf")
    for _ in range(5):
        fused_ms = min(fused_ms, best_ms(fused, max(n // 5, 1), rounds=1))
        alone_ms = min(alone_ms, best_ms(gradient_step, max(n // 5, 1), rounds=1))
    return {
        "dispatch: the jitted update's call returns (median)": float(np.median(dispatch)) * 1e3,
        "(of which the calling thread's CPU time, median)": float(np.median(thread_cpu)) * 1e3,
        "(the same call on a program that computes nothing)": float(np.median(returns)) * 1e3,
        "device: fused iteration, blocked (insert, sample, train, act)": fused_ms,
        "device: gradient step alone, blocked (bench's update-only)": alone_ms,
    }


def dispatch_rows(state, n: int) -> dict[str, float]:
    """What a call costs per array it passes: a trivial jitted function over the learner state's leaves
    (in and out, donated) against the same bytes as one flat array."""
    leaves = jax.tree.leaves(state)
    floats = [leaf for leaf in leaves if jnp.issubdtype(leaf.dtype, jnp.floating)]
    flat = jnp.concatenate([leaf.reshape(-1).astype(jnp.float32) for leaf in floats])
    touch = jax.jit(lambda tree: jax.tree.map(lambda x: x, tree), donate_argnums=0)
    tree = [jnp.array(leaf) for leaf in floats]
    one = [flat]

    def call_tree():
        nonlocal tree
        tree = touch(tree)
        jax.block_until_ready(tree)

    def call_one():
        nonlocal one
        one = touch(one)
        jax.block_until_ready(one)

    call_tree(), call_one()
    return {
        f"(dispatch probe: {len(floats)} float leaves in and out)": best_ms(call_tree, n),
        "(dispatch probe: the same bytes as 1 array)": best_ms(call_one, n),
    }


def bookkeeping_rows(host, reward, done, n: int) -> dict[str, float]:
    seed = host.seeds[0]

    def counters():
        host.env_steps += 1
        host.vector_steps += 1
        return host.pending.full, host.env_steps <= host.update_start

    return {
        "bookkeeping: episode tracker": best_ms(lambda: seed.episodes.step(reward, done), n),
        "bookkeeping: counters and due checks": best_ms(counters, n),
        "bookkeeping: host.active (per step today)": best_ms(lambda: host.active, n),
    }


def loop_row(algo: str, steps: int) -> dict[str, float]:
    """The whole loop and the update alone, as `bench speed` measures them (one row)."""
    row = rlbench_row(algo, ENV_ID, 1, 1, steps, [256, 256], update_seconds=5.0)
    return {
        "loop: ms per env step": 1e3 / row["env_steps_per_s"],
        "update alone: ms per step": 1e3 / row["update_only_grad_steps_per_s"],
        "loop_efficiency": row["loop_efficiency"],
    }


def timed_loop_rows(algo: str, steps: int) -> dict[str, float]:
    """The real loop (train_seeds), with time.perf_counter around each call of its body, ms per env step
    over `steps` env steps after the warm-up. `act` includes waiting for the update that chose the action."""
    from rlbench.loggers.base import MultiLogger
    from rlbench.loop import collect, training_loop, updating
    from rlbench.loop.runner import SeedOutput, train_seeds

    spent: dict[str, float] = {}
    parts = [(collect, "act"), (collect, "step"), (collect, "stage"), (updating, "train_if_due")]
    parts.append((training_loop, "run_what_is_due"))
    originals = {name: getattr(module, name) for module, name in parts}

    def timed(name, fn):
        def call(*args):
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return call

    cfg = bench_config(algo, 1, [256, 256])
    warmup = cfg.learning_starts + 100
    marks = {}

    def on_iteration(env_steps, state):
        if env_steps == warmup:
            spent.clear()
            marks["start"] = time.perf_counter()

    from rlbench.config.entry import RunConfig

    run = RunConfig(env_id=ENV_ID, n_timesteps=warmup + steps, eval_freq=-1, verbose=0, seed=0)
    for module, name in parts:
        setattr(module, name, timed(name, originals[name]))
    try:
        train_seeds(run, ALGORITHMS[algo], cfg, [SeedOutput(lambda names: MultiLogger([]))], on_iteration=on_iteration)
    finally:
        for module, name in parts:
            setattr(module, name, originals[name])
    total = time.perf_counter() - marks["start"]
    rows = {f"real loop: {name}": spent.get(name, 0.0) / steps * 1e3 for _, name in parts}
    rows["real loop: the rest (loop condition, wrappers)"] = (total - sum(spent.values())) / steps * 1e3
    rows["real loop: total"] = total / steps * 1e3
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", nargs="+", default=["sac", "tqc"])
    parser.add_argument("--steps", type=int, default=2000, help="calls per timing round (and loop steps timed)")
    parser.add_argument("--json", action="store_true", help="print one JSON line per algorithm too")
    args = parser.parse_args()
    print(cpu_flags())
    print(f"jax {jax.__version__} on {jax.default_backend()}; {ENV_ID}, 1 env x 1 gradient step, float32")
    env = env_rows(args.steps)
    for algo in args.algo:
        rows = {**loop_row(algo, args.steps), **timed_loop_rows(algo, args.steps), **env, **loop_rows(algo, args.steps)}
        overhead = rows["loop: ms per env step"] - rows["update alone: ms per step"]
        print(f"\n{algo}: host overhead (loop - update alone) {overhead:.3f} ms per env step")
        for name, value in rows.items():
            print(f"  {name:58s} {value:8.3f}")
        if args.json:
            print(json.dumps({"algo": algo, **{k: round(v, 4) for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
