"""The values a checkpoint holds, checked before a resume uses any of them. The readers check what each member
is (rlbench.store.expectations: shapes and dtypes; learner_state: the learner state's structure); this checks
what it holds. A checkpoint rlbench writes never holds a NaN or inf (rlbench.loop.saving refuses to write one)
and its counters stay within their ranges, so a file that breaks either was edited, or not written by
rlbench, and resuming from it would train on the forged value: an infinite learning rate "diverges" at the
first check, a NaN noise state trains to the end on NaN actions, a negative counter never reaches its limit.
"""

from __future__ import annotations

import jax
import numpy as np
from flax import serialization

from rlbench.store.checkpoint import Checkpoint
from rlbench.store.learner_state import STATE
from rlbench.types import PyTree

FORGED = "no checkpoint rlbench writes holds such a value: the file was edited, or not written by rlbench"


def check_checkpoint_values(checkpoint: Checkpoint) -> None:
    """ValueError naming the first member (and leaf, or index) whose value no checkpoint rlbench writes holds:
    a NaN or inf anywhere (learner state, optimizer and noise states, host arrays, `normalize` statistics,
    replay buffer, the manifest's best reward and metrics), or a counter outside its range. The device loop's
    env state is checked against the envs it restores into (rlbench.loop.device.start)."""
    problem = tree_problem(serialization.msgpack_restore(checkpoint.state_bytes), counters=True)
    if problem:
        raise ValueError(f"{STATE} holds {problem} ({FORGED})")
    for name, array in checkpoint.arrays.items():  # host/device_envs: msgpack bytes, uint8
        problem = array_problem(array, counters=True)
        if problem:
            raise ValueError(f"{name}.npy holds {problem} ({FORGED})")
    problems = _range_problems(checkpoint)
    if problems:
        raise ValueError(f"{problems[0]} ({FORGED})")


def tree_problem(tree: PyTree, counters: bool) -> str | None:
    """What is wrong with the first leaf of `tree` (numpy arrays) that holds a NaN or inf or, with `counters`
    (every signed integer a counter: steps, optimizer counts), a negative number; None when none does."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        problem = array_problem(np.asarray(leaf), counters, jax.tree_util.keystr(path, simple=True, separator="."))
        if problem:
            return problem
    return None


def array_problem(array: np.ndarray, counters: bool, where: str = "") -> str | None:
    """'NaN at <where>[i, j]', 'inf ...' or (with `counters`, for a signed integer array) 'the negative count -5
    ...' for the first such value of `array`; None when it holds none."""
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array)
    elif counters and array.dtype.kind == "i":
        bad = array < 0
    else:
        return None
    if not bad.any():
        return None
    index = np.unravel_index(np.argmax(bad), array.shape)
    value = array[index]
    shown = "NaN" if np.isnan(value) else "inf" if np.isinf(value) else f"the negative count {int(value)}"
    at = where + (f"[{', '.join(map(str, index))}]" if array.ndim else "")
    return f"{shown} at {at}" if at else shown


def _range_problems(checkpoint: Checkpoint) -> list[str]:
    """Each counter outside what the checkpoint's other counters allow, and each non-finite manifest value."""
    host, manifest = checkpoint.group("host"), checkpoint.manifest
    problems = [] if manifest.run.wandb_run_id is None else _wandb_run_id_problems(manifest.run.wandb_run_id)
    steps = {
        "episode_lengths": manifest.host.vector_steps,  # an episode is no longer than the run so far
        "finished_lengths": manifest.host.vector_steps,
        "eval_timesteps": manifest.counters.env_steps,  # evaluated at an env step already taken
    }
    for name, most in steps.items():
        if name in host and len(host[name]) and host[name].max() > most:
            problems.append(f"host/{name}.npy holds {int(host[name].max())}, more than the checkpoint's {most} steps")
    if manifest.host.episodes_at_last_log > manifest.counters.episodes:
        problems.append(
            f"manifest host.episodes_at_last_log: {manifest.host.episodes_at_last_log}, more than the "
            f"{manifest.counters.episodes} episodes finished"
        )
    best = manifest.host.best_mean_reward
    if best is not None and not np.isfinite(best):
        problems.append(f"manifest host.best_mean_reward: {best}")
    # NaN is a metric's value in an iteration without its step (an actor loss when the actor did not move)
    for name, value in (manifest.host.metrics or {}).items():
        if np.isinf(value):
            problems.append(f"manifest host.metrics[{name!r}]: {value}")
    buffer = checkpoint.group("replay_buffer")
    if buffer:
        rows, position, capacity = len(buffer["rows"]), int(buffer["position"]), int(buffer["capacity"])
        # A buffer not yet full is filled up to its position (one outside the buffer: check_buffer_arrays names it).
        if rows < capacity and position != rows and 0 <= position < capacity:
            problems.append(
                f"replay_buffer/position.npy holds {position}, but a buffer not yet full ({rows} of {capacity} rows) "
                "is filled up to its position"
            )
    return problems


# What W&B refuses in a run id (wandb 0.31's Settings.validate_run_id: these characters, empty, or whitespace at
# either end; its docs before it named \\ and % too), which `-i --track` passes to wandb.init to continue the run.
WANDB_RESERVED = ":;,#?/'\\%"


def _wandb_run_id_problems(run_id: str) -> list[str]:
    """Why W&B would refuse `run_id` (its UsageError, a traceback, once the run folder exists), or nothing."""
    if run_id and run_id == run_id.strip() and run_id.isprintable() and not set(run_id) & set(WANDB_RESERVED):
        return []
    return [
        f"manifest wandb_run_id: {run_id[:60]!r} is not a W&B run id (W&B takes a non-empty printable id without "
        f"whitespace at either end and without any of {WANDB_RESERVED})"
    ]
