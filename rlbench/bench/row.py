"""One `bench speed` row, measured in this process (`--one-row`, `--one-first-step`; rlbench.bench.speed
starts a fresh process for each, so that its compile time and peak memory are its own).

A row's run is resolved and launched as train.py's are (rlbench.run.experiment, rlbench.run.launch), from
the peer script's hyperparameters instead of a file's, in process: no run folder, logger or checkpoint.
`on_iteration` marks the timed window, blocking on the learner state; the compiled update is then timed
alone on fixed random batches, and XLA's cost analysis counts one gradient step's FLOP (rlbench.run.cost).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.algos.common.config import ActorCriticConfig, LearnerConfig
from rlbench.algos.common.learner import Learner
from rlbench.bench.children import Row
from rlbench.loop.device.envs import steps_on_device
from rlbench.run.cost import gradient_step_gflop
from rlbench.types import EnvSpec, PyTree, Transition, VecEnvKind

if TYPE_CHECKING:
    from rlbench.run.experiment import Experiment

WARMUP_STEPS = 1000  # random phase (learning_starts), as the peer script


def bench_entry(
    algo: str, gradient_steps: int, qf: list[int], precision: str = "float32", policy: str = "MlpPolicy"
) -> dict[str, Any]:
    """The peer script's settings over each algorithm's defaults (DroQ and CrossQ presets included):
    learning_starts 1000, train_freq 1, actor [256, 256] and the given critic widths, the network family,
    and TD3's action noise."""
    entry: dict[str, Any] = {
        "learning_starts": WARMUP_STEPS,
        "train_freq": 1,
        "gradient_steps": gradient_steps,
        "policy_kwargs": {"net_arch": {"pi": [256, 256], "qf": list(qf)}},
    }
    if precision != "float32":
        entry["precision"] = precision
    if policy != "MlpPolicy":
        entry["policy"] = policy
    if algo == "droq":
        entry["policy_delay"] = gradient_steps
    elif algo in ("td3", "ddpg"):  # RL Zoo's HalfCheetah noise, as the peer script's
        entry.update(noise_type="normal", noise_std=0.1)
    return entry


def bench_config(algo: str, gradient_steps: int, qf: list[int], precision: str = "float32") -> LearnerConfig:
    """The learner config of a row's entry, without an env (the cost analysis by hand)."""
    from rlbench.config.hyperparams import merge
    from rlbench.config.registry import ALGORITHMS

    spec = ALGORITHMS[algo]
    return spec.build_config(merge(spec.preset, bench_entry(algo, gradient_steps, qf, precision)), 1, "benchmark")


def bench_experiment(
    algo: str,
    env_id: str,
    n_envs: int,
    gradient_steps: int,
    qf: list[int],
    precision: str,
    n_timesteps: int,
    n_seeds: int = 1,
    policy: str = "MlpPolicy",
    vec_env: VecEnvKind = "dummy",
) -> Experiment:
    """A row's run, resolved as train.py resolves its runs (seed 0, no evaluation, quiet), from the row's
    hyperparameters instead of a file's."""
    from rlbench.run.experiment import RunRequest, resolve

    entry = {**bench_entry(algo, gradient_steps, qf, precision, policy), "n_envs": n_envs}
    request = RunRequest(
        algo=algo, env=env_id, entry=entry, n_timesteps=n_timesteps, seed=0, n_seeds=n_seeds, eval_freq=-1,
        verbose=0, vec_env=vec_env,
    )  # fmt: skip
    return resolve(request)


def train_in_process(exp: Experiment, on_iteration: Callable[[int, PyTree], None]) -> None:
    """Train `exp` through rlbench.run.launch without a run folder, a logger or a checkpoint; what stops
    it is raised (a row that fails prints its traceback)."""
    from rlbench.run.launch import Hooks, launch
    from rlbench.run.outputs import RunOutputs

    launched = launch(exp, RunOutputs(run_folders=False), Hooks(on_iteration=on_iteration))
    if launched.error is not None:
        raise launched.error


def random_batches(spec: EnvSpec, n_steps: int, batch_size: int) -> Transition:
    """[n_steps, batch_size, ...] transitions of random floats (actions in [-1, 1], none terminal)."""
    rng = np.random.default_rng(0)
    shape = (n_steps, batch_size)
    return Transition(
        obs=jnp.asarray(rng.normal(size=(*shape, spec.obs_dim)), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, size=(*shape, spec.action_dim)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=shape), jnp.float32),
        next_obs=jnp.asarray(rng.normal(size=(*shape, spec.obs_dim)), jnp.float32),
        terminated=jnp.zeros(shape, jnp.float32),
    )


class FusedSteps(Protocol):
    """What the update's rate reads of an off-policy config (ActorCriticConfig)."""

    @property
    def gradient_steps(self) -> int: ...

    @property
    def batch_size(self) -> int: ...


def update_only_rate(
    learner: Learner[Any], cfg: FusedSteps, spec: EnvSpec, seconds: float = 5.0, n_seeds: int = 1
) -> float:
    """Gradient steps/s (of all seeds) of the compiled fused steps alone, on fixed random batches; with
    `n_seeds` K, one vmapped call updates K learners, as a K-seed run does."""
    from rlbench.algos.common.seed_axis import SeedAxis

    assert learner.gradient_steps_fn is not None, "an off-policy learner fuses its gradient steps"
    axis = SeedAxis(n_seeds)
    g = cfg.gradient_steps
    batches = axis.stack([random_batches(spec, g, cfg.batch_size)] * n_seeds)
    keys = axis.stack([jax.random.split(jax.random.PRNGKey(1), g)] * n_seeds)
    state = axis.init(jax.jit(learner.init_fn), [jax.random.PRNGKey(seed) for seed in range(n_seeds)])
    progress = jnp.asarray(1.0)
    steps = jax.jit(axis.map(learner.gradient_steps_fn, shared_argnums=(3, 4)), donate_argnums=0)
    # The gradient steps done before each call decide, as in training, which of them update the actor.
    state, _ = steps(state, batches, keys, progress, 0)
    jax.block_until_ready(state)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        state, _ = steps(state, batches, keys, progress, (calls + 1) * g)
        calls += 1
    jax.block_until_ready(state)
    return calls * g * n_seeds / (time.perf_counter() - start)


def rlbench_row(
    algo: str,
    env_id: str,
    n_envs: int,
    gradient_steps: int,
    steps: int,
    qf: list[int],
    precision: str = "float32",
    update_seconds: float = 5.0,
    n_seeds: int = 1,
    policy: str = "MlpPolicy",
    vec_env: VecEnvKind = "dummy",
) -> Row:
    """Time `steps` env steps after 1000 random steps and 100 * n_envs training steps of warm-up, then the
    update alone for `update_seconds`. With `n_seeds` K, K vmapped seeds train together: the rates are
    for all seeds together, `per_seed_env_steps_per_s` for each."""
    warmup = WARMUP_STEPS + 100 * n_envs
    exp = bench_experiment(
        algo, env_id, n_envs, gradient_steps, qf, precision, warmup + steps, n_seeds, policy, vec_env
    )
    marks = timed_training(exp, warmup, steps)
    seconds = marks["end"] - marks["start"]
    timed = (marks["end_steps"] - marks["start_steps"]) * n_seeds  # env steps of all seeds
    grad_steps_per_s = timed / n_envs * gradient_steps / seconds
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cfg, spec = exp.learner_config, exp.env_spec
    assert isinstance(cfg, ActorCriticConfig), "these rows are off-policy learners' (entry_row: PPO's)"
    learner = exp.algo.make_learner(cfg, spec)
    gflop = gradient_step_gflop(learner, cfg, spec, compiled=True)
    bare = update_only_rate(learner, cfg, spec, update_seconds, n_seeds)
    device_loop = steps_on_device(env_id, vec_env)
    return {
        **row_case(algo, env_id, n_envs, gradient_steps, qf, precision, policy, vec_env),
        **(
            {"n_seeds": n_seeds, "per_seed_env_steps_per_s": round(timed / n_seeds / seconds, 1)} if n_seeds > 1 else {}
        ),
        "env_steps_per_s": round(timed / seconds, 1),
        "grad_steps_per_s": round(grad_steps_per_s, 1),
        # The device loop's first update runs inside a chunk of many steps: it has no time of its own.
        **({} if device_loop else {"compile_s": round(marks["compile_s"], 2)}),
        "update_only_grad_steps_per_s": round(bare, 1),
        "loop_efficiency": round(grad_steps_per_s / bare, 3),
        "gflop_per_grad_step": round(gflop, 4),
        "achieved_gflops": round(grad_steps_per_s * gflop, 1),
        "peak_rss_mib": round(peak_rss_mib, 1),
        **peak_device_memory(),
    }


def peak_device_memory() -> dict[str, float]:
    """On a GPU, `peak_device_mib`: the most device memory this process held; nothing elsewhere."""
    stats = jax.devices()[0].memory_stats() if jax.default_backend() == "gpu" else None
    if stats and "peak_bytes_in_use" in stats:
        return {"peak_device_mib": round(stats["peak_bytes_in_use"] / 2**20, 1)}
    return {}


def timed_training(exp: Experiment, warmup: int, steps: int) -> dict[str, float]:
    """Train `exp`, marking (blocking on the state) the first update's time (`compile_s`: compiling it,
    plus one step) and the start and end of the `steps` env steps timed after `warmup`."""
    marks: dict[str, float] = {}
    last: dict[str, float] = {}

    def on_iteration(env_steps: int, state: PyTree) -> None:
        now = time.perf_counter()
        if env_steps > WARMUP_STEPS and "compile_s" not in marks:
            jax.block_until_ready(state)
            marks["compile_s"] = time.perf_counter() - last["time"]  # first update: compile + one step
        last["time"] = now
        if env_steps >= warmup and "start" not in marks:
            jax.block_until_ready(state)
            marks["start"], marks["start_steps"] = time.perf_counter(), env_steps
        if env_steps >= warmup + steps and "end" not in marks:
            jax.block_until_ready(state)
            marks["end"], marks["end_steps"] = time.perf_counter(), env_steps

    last["time"] = time.perf_counter()
    train_in_process(exp, on_iteration)
    return marks


def first_step_row(
    algo: str,
    env_id: str,
    n_envs: int,
    gradient_steps: int,
    qf: list[int],
    precision: str = "float32",
    policy: str = "MlpPolicy",
) -> Row:
    """Seconds from nothing built to the end of the first gradient step: the run resolved (its checks build
    and step one env, as train.py's), the envs, the learner, every compilation, the warm-up steps (random
    actions, no compilation), the first update."""
    start = time.perf_counter()
    first: dict[str, float] = {}

    def on_iteration(env_steps: int, state: PyTree) -> None:
        if env_steps > WARMUP_STEPS and "end" not in first:
            jax.block_until_ready(state)
            first["end"] = time.perf_counter()

    warmup = WARMUP_STEPS + n_envs
    train_in_process(
        bench_experiment(algo, env_id, n_envs, gradient_steps, qf, precision, warmup, policy=policy), on_iteration
    )
    return {
        **row_case(algo, env_id, n_envs, gradient_steps, qf, precision, policy),
        "first_grad_step_s": round(first["end"] - start, 2),
    }


def row_case(
    algo: str,
    env_id: str,
    n_envs: int,
    gradient_steps: int,
    qf: list[int],
    precision: str,
    policy: str = "MlpPolicy",
    vec_env: VecEnvKind = "dummy",
) -> Row:
    """The fields that say which case an rlbench row measured (`policy` only when not MlpPolicy, `vec_env` only
    when not dummy)."""
    return {
        **({"policy": policy} if policy != "MlpPolicy" else {}),
        **({"vec_env": vec_env} if vec_env != "dummy" else {}),
        "system": "rlbench",
        "loop": "device" if steps_on_device(env_id, vec_env) else "host",
        "algo": algo,
        "env": env_id,
        "n_envs": n_envs,
        "gradient_steps": gradient_steps,
        "qf": qf,
        "precision": precision,
    }
