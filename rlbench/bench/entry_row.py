"""One `bench speed` row of a learner that trains RL Zoo's entry for the env (PPO, A2C, DQN, QR-DQN), measured in
this process (`--one-row`), and the SBX peer's row of the same case.

An entry row trains RL Zoo's entry for the env as train.py reads it (hyperparams/<algo>.yml: n_envs, n_steps or
train_freq, batch sizes, normalize, networks, schedules), resolved and launched as train.py's runs
(rlbench.run.experiment, rlbench.run.launch) with seed 0, no evaluation, no run folder; on a JAX-native env, its
gymnasium twin's entry (`bench speed` passes it: RL Zoo's files name gymnasium's ids). An "update" is what the
learner trains on at once: PPO's rollout, or DQN's train_freq vector steps. Warm-up is learning_starts (DQN) and
two updates (the first compiles acting and the update; the second runs them compiled; on the device loop: its
first chunk, at least); then `steps` env steps (rounded up to whole updates) are timed between two
`on_iteration` marks, each blocking on the learner state. A gradient step is one minibatch step (PPO: n_epochs x
ceil(rollout / batch_size) per rollout; A2C: one; DQN: gradient_steps), counted by the learner state's `step`
over the timed window (so a target_kl that stops epochs early is counted as it ran). The compiled update is
then timed alone on fixed random transitions (no env, no host work; DQN's buffer holds them alone);
`update_compile_s` is the time to compile it there, or to load it from the compilation cache when that holds it.

`gflop_per_grad_step` is "n/a" on these rows: XLA's cost analysis counts a loop's body once (PPO's update on
CartPole-v1's entry: 0.021 GFLOP for its 20 minibatch steps, one step being 0.014), and the figure would be
comparable across rows only if every learner exposed its gradient step alone.

The peer (`--peer`) is SBX's PPO or DQN built by benchmarks/sbx_entry_row_speed.py in the peer's venv from the
same resolved entry in RL Zoo's format (rlbench.bench.peer_hyperparams), timed the same way; a setting SBX cannot
express makes the peer's row a refusal naming it. SBX has no A2C or QR-DQN: `bench speed` refuses `--peer` with them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.bench.children import Row, row_from, run_child
from rlbench.bench.peer_hyperparams import PEER_ALGOS, Untranslatable, peer_entry
from rlbench.types import PyTree, Transition

if TYPE_CHECKING:
    from rlbench.algos.common.learner import Learner
    from rlbench.run.experiment import Experiment

ENTRY_ALGOS = ("ppo", "a2c", "dqn", "qrdqn")
WARMUP_ROLLOUTS = 2  # updates: the first compiles acting and the update; the second runs them compiled
DEFAULT_ROLLOUTS = 16  # updates timed when --steps is not given
PEER_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sbx_entry_row_speed.py"
NOT_COUNTED = "n/a"  # the FLOP of a minibatch step: see the module docstring


def entry_experiment(
    algo: str, env_id: str, device: str = "auto", entry_env: str | None = None, params: tuple[str, ...] = ()
) -> Experiment:
    """The row's run, resolved as train.py resolves `--algo ALGO --env ENV -params PARAMS` (the file's entry and its
    n_timesteps, which the row replaces), with seed 0, no evaluation, quiet. With `entry_env` (a JAX-native
    env's gymnasium twin: RL Zoo's files name gymnasium's ids), that env's entry, resolved, is the row's."""
    from rlbench.run.experiment import RunRequest, resolve

    entry = None
    if entry_env is not None and entry_env != env_id:
        entry = entry_experiment(algo, entry_env, device, params=params).hyperparams
        params = ()  # in the twin's entry already
    request = RunRequest(
        algo=algo, env=env_id, seed=0, eval_freq=-1, verbose=0, device=device, entry=entry, params=tuple(params)
    )
    return resolve(request)


def rollout_size(exp: Experiment, learner: Learner[Any]) -> int:
    """Env steps per update: the learner's vector steps per update (n_steps, or train_freq) times the run's envs."""
    return learner.collection.vector_steps_per_update * exp.run.n_envs


def warmup_steps(exp: Experiment, learner: Learner[Any]) -> int:
    """learning_starts (DQN's warm-up) and WARMUP_ROLLOUTS updates; on the device loop (a JAX-native env), at least
    its first chunk (of whole rollouts, on-policy), which compiles the whole training program and after which the
    host first hears from it (`on_iteration` follows each chunk; a chunk ends early only at the run's end here,
    with no evaluation or checkpoint due)."""
    from rlbench.algos.common.config import ReplayConfig
    from rlbench.algos.common.fused import steps_per_update
    from rlbench.envs.jax_native.ids import is_jax_native
    from rlbench.loop.device.runner import chunk_length

    collection, update = learner.collection, rollout_size(exp, learner)
    # The first update follows the first whole update's steps past learning_starts: every mark on an update's end.
    warmup = (collection.learning_starts // update + WARMUP_ROLLOUTS) * update
    if not is_jax_native(exp.run.env_id):
        return warmup
    if collection.stages_rollout:
        vector_steps = chunk_length(exp.run.n_envs, rollout_steps=collection.vector_steps_per_update)
    else:
        cfg = exp.learner_config
        assert isinstance(cfg, ReplayConfig), "a learner that stages no rollout is an off-policy one"
        vector_steps = chunk_length(exp.run.n_envs, steps_per_update(cfg), cfg.train_freq)
    return max(warmup, vector_steps * exp.run.n_envs)


def timed_steps(rollout: int, steps: int | None) -> int:
    """`steps` rounded up to whole rollouts (a rollout is trained on whole); None: DEFAULT_ROLLOUTS."""
    return rollout * (DEFAULT_ROLLOUTS if steps is None else max(1, -(-steps // rollout)))


def entry_row(
    algo: str,
    env_id: str,
    steps: int | None = None,
    update_seconds: float = 5.0,
    entry_env: str | None = None,
    params: tuple[str, ...] = (),
) -> Row:
    """Train WARMUP_ROLLOUTS rollouts, time `steps` env steps (whole rollouts), then the update alone; with
    `entry_env`, that env's entry, and `params` over the entry (entry_experiment)."""
    from rlbench.bench.row import peak_device_memory

    exp = entry_experiment(algo, env_id, entry_env=entry_env, params=tuple(params))
    learner = exp.algo.make_learner(exp.learner_config, exp.env_spec)
    rollout = rollout_size(exp, learner)
    warmup, steps = warmup_steps(exp, learner), timed_steps(rollout, steps)
    exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, n_timesteps=warmup + steps))
    marks = timed_rollouts(exp, warmup, steps)
    seconds = marks["end"] - marks["start"]
    timed = marks["end_steps"] - marks["start_steps"]
    grad_steps = marks["end_grad_steps"] - marks["start_grad_steps"]
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    compile_s, bare = update_only_rate(learner, exp, update_seconds)
    grad_steps_per_s = grad_steps / seconds
    return {
        **entry_case(algo, env_id, exp, rollout),
        **({"entry_of": entry_env} if entry_env not in (None, env_id) else {}),
        **({"params": list(params)} if params else {}),
        "grad_steps_per_rollout": round(grad_steps * rollout / timed, 2),
        "steps": timed,
        "env_steps_per_s": round(timed / seconds, 1),
        "grad_steps_per_s": round(grad_steps_per_s, 1),
        "update_compile_s": round(compile_s, 2),
        "update_only_grad_steps_per_s": round(bare, 1),
        "loop_efficiency": round(grad_steps_per_s / bare, 3),
        "gflop_per_grad_step": NOT_COUNTED,
        "achieved_gflops": NOT_COUNTED,
        "peak_rss_mib": round(peak_rss_mib, 1),
        **peak_device_memory(),
    }


def entry_case(algo: str, env_id: str, exp: Experiment, rollout: int) -> Row:
    """The fields that say which case a row measured: the entry's envs, rollout and minibatch size."""
    from rlbench.envs.jax_native.ids import is_jax_native

    return {
        "system": "rlbench",
        "loop": "device" if is_jax_native(env_id) else "host",
        "algo": algo,
        "env": env_id,
        "n_envs": exp.run.n_envs,
        "rollout": rollout,
        "batch_size": exp.learner_config.batch_size or rollout,  # None: the whole rollout (A2C)
        "precision": "float32",
    }


def timed_rollouts(exp: Experiment, warmup: int, steps: int) -> dict[str, float]:
    """Train `exp`, marking (blocking on the state) the start and end of the `steps` env steps after `warmup`,
    with the learner's gradient steps at each. On-policy, `on_iteration` follows each update, so every mark is
    at a rollout's end."""
    from rlbench.bench.row import train_in_process

    marks: dict[str, float] = {}

    def mark(name: str, env_steps: int, state: PyTree) -> None:
        jax.block_until_ready(state)
        marks[name], marks[f"{name}_steps"] = time.perf_counter(), env_steps
        marks[f"{name}_grad_steps"] = int(np.sum(state.step))

    def on_iteration(env_steps: int, state: PyTree) -> None:
        if env_steps >= warmup and "start" not in marks:
            mark("start", env_steps, state)
        if env_steps >= warmup + steps and "end" not in marks:
            mark("end", env_steps, state)

    train_in_process(exp, on_iteration)
    return marks


def random_rollout(exp: Experiment, rollout: int) -> Transition:
    """The staged transitions of one rollout [rollout, ...]: random observations and rewards, valid actions (a
    Discrete index column, or a Box action in [-1, 1]), a few episode ends."""
    spec, rng = exp.env_spec, np.random.default_rng(0)
    if spec.discrete:
        action = rng.integers(0, spec.n_actions, size=(rollout, 1)).astype(np.float32)
    else:
        action = rng.uniform(-1, 1, size=(rollout, spec.action_dim)).astype(np.float32)
    return Transition(
        obs=jnp.asarray(rng.normal(size=(rollout, spec.obs_dim)), jnp.float32),
        action=jnp.asarray(action),
        reward=jnp.asarray(rng.normal(size=rollout), jnp.float32),
        next_obs=jnp.asarray(rng.normal(size=(rollout, spec.obs_dim)), jnp.float32),
        terminated=jnp.asarray(rng.uniform(size=rollout) < 0.01, jnp.float32),
        truncated=jnp.asarray(rng.uniform(size=rollout) < 0.01, jnp.float32),
    )


def update_only_rate(learner: Learner[Any], exp: Experiment, seconds: float = 5.0) -> tuple[float, float]:
    """(seconds to compile the update, gradient steps/s of the compiled update alone on one fixed random
    rollout, called again and again for `seconds`; its gradient steps counted by the state's `step`)."""
    rollout = random_rollout(exp, rollout_size(exp, learner))
    state = jax.jit(learner.init_fn)(jax.random.PRNGKey(0))
    storage = learner.storage.init_fn()
    args = (rollout, jnp.asarray(1.0), jnp.asarray(0, jnp.int32), None)
    start = time.perf_counter()
    # The replay buffer donated as the loop donates it: kept, a call would copy it whole (Atari's: 0.5 GiB).
    update = jax.jit(learner.update_fn, donate_argnums=(0, 1)).lower(state, storage, *args).compile()
    compile_s = time.perf_counter() - start
    state, storage, _ = update(state, storage, *args)
    first = int(jax.block_until_ready(state).step)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        state, storage, _ = update(state, storage, *args)
    last = int(jax.block_until_ready(state).step)
    return compile_s, (last - first) / (time.perf_counter() - start)


# -- the peer --------------------------------------------------------------------------------------


def peer_case(
    algo: str, env_id: str, steps: int | None, device: str = "auto", params: tuple[str, ...] = ()
) -> tuple[Row, dict[str, Any] | str]:
    """(the case's fields, the peer's entry in RL Zoo's format or why SBX cannot train it), resolved in this
    process as the rlbench row resolves it (the same file entry and -params)."""
    exp = entry_experiment(algo, env_id, device=device, params=params)
    rollout = rollout_size(exp, exp.algo.make_learner(exp.learner_config, exp.env_spec))
    case = {**entry_case(algo, env_id, exp, rollout), "system": "peer", "steps": timed_steps(rollout, steps)}
    del case["loop"], case["precision"]
    if params:
        case["params"] = list(params)
    try:
        return case, peer_entry(algo, exp.hyperparams)[1]
    except Untranslatable as error:
        return case, str(error)


def entry_peer_row(
    python: str,
    script: Path,
    algo: str,
    env_id: str,
    steps: int | None,
    device: str = "cpu",
    params: tuple[str, ...] = (),
) -> Row:
    """The peer's row: SBX's PPO or DQN trained on the translated entry by `script` in the peer's Python, or a refusal
    naming what SBX cannot express (not an error: nothing failed)."""
    case, entry = peer_case(algo, env_id, steps, params=params)
    if isinstance(entry, str):
        return {**case, "device": device, "refused": entry}
    command = [python, str(script), "--algo", PEER_ALGOS[algo], "--env", env_id, "--steps", str(case["steps"])]
    command += ["--entry", json.dumps(entry)]
    # As the off-policy peer's: no GPU for a CPU row, no pre-allocation of the GPU's memory for a GPU row.
    env = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"} if device == "cpu" else {}
    env = env or {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    return {**row_from(run_child(command, env={**os.environ, **env}), case), "device": device}
