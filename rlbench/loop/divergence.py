"""What the loop does when a learner diverges: a one-seed run ends (DivergenceError, after its
checkpoint), a seed of several is frozen at its last finite state while the others train on. The checks
themselves are rlbench.loop.divergence_guard's DivergenceGuard; the loop calls `verify_finite` when the metrics come
to the host anyway (log, evaluation, checkpoint) and `finite_actions` on every action it is about to take."""

from __future__ import annotations

import sys

import numpy as np

from rlbench.errors import DivergenceError
from rlbench.files import atomic_write_text
from rlbench.loop.run_state import LoopRun

DIVERGED_METRIC = "train/diverged"  # 1 in the last row of a seed that diverged (runs of several seeds)
FAILED_FILE = "failed.txt"  # in the run folder of a seed that diverged: why, and its checkpoint


def verify_finite(loop: LoopRun) -> dict[str, np.ndarray]:
    """The last training metrics ([n_seeds] each, on the host), after checking them and each training
    seed's learner state (DivergenceGuard). A seed that diverged ends a one-seed run (DivergenceError); in a
    run of several it is frozen."""
    host = loop.host
    metrics, diverged = loop.guard.check(host.env_steps, loop.state, host.metrics, host.active)
    if diverged and not loop.axis.batched:
        raise DivergenceError(diverged[0])
    for index, message in diverged.items():
        freeze(loop, index, message)
    return metrics


def finite_actions(loop: LoopRun, action: np.ndarray) -> np.ndarray:
    """The actions the envs are to take, checked on the host (a NaN actor never drives the envs): a
    diverged seed of several takes one idle step; non-finite actions from finite learners are refused."""
    if np.isfinite(action).all():
        return action
    verify_finite(loop)  # raises for one seed; freezes the diverged seeds of several
    action = np.where(loop.host.active[:, None, None], action, 0.0).astype(np.float32)
    if not np.isfinite(action).all():
        raise DivergenceError(
            f"non-finite action at env step {loop.host.env_steps} from a finite learner "
            "state: the observations hold NaN or inf"
        )
    return action


def freeze(loop: LoopRun, index: int, message: str) -> None:
    """A seed of several diverged: write its checkpoint with its last finite state, mark it failed
    (failed.txt in its folder, a `train/diverged` row in its logs), and put its last finite state back
    on the device, where the update leaves it unchanged from now on."""
    host, seed, output = loop.host, loop.host.seeds[index], loop.outputs[index]
    note = ""
    if loop.saves.enabled:
        note = loop.saves.write_after_failure(
            host,
            index,
            DivergenceError(message),
            None,
            loop.carry.buffer_state,
            loop.episode_records(),
            loop.guard.verified,
        )
    seed.failed = loop.failed[index] = message
    loop.loggers[index].log({DIVERGED_METRIC: 1.0}, host.env_steps)
    if output.run_dir is not None:
        atomic_write_text(output.run_dir / FAILED_FILE, f"{message}\n{note}\n")
    loop.state = loop.programs.copy_seed_slice(loop.state, loop.guard.verified.state, index)
    loop.training_changed()
    print(
        f"Seed {seed.seed} diverged and is frozen ({message}); {note or 'no checkpoint'}. "
        f"{int(host.active.sum())} seed(s) train on",
        file=sys.stderr,
        flush=True,
    )
