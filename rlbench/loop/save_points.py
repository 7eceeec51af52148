"""When the loop writes checkpoints, and which: every save_freq env steps, at the end, when a stop was
requested and after a failure. The checkpoint format and what each one holds per seed are
rlbench.loop.saving's (`RunCheckpoints`); each learner state is checked finite before it is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlbench.errors import EnvWorkerError, RunFailure
from rlbench.loop.divergence import verify_finite
from rlbench.loop.run_state import LoopRun
from rlbench.loop.saving import CheckpointSettings
from rlbench.store.manifest import CheckpointKind


def save(
    loop: LoopRun,
    kind: CheckpointKind,
    path_of: Callable[[CheckpointSettings], Path],
    with_buffer: bool | None = None,
    compress: bool = True,
) -> list[Path | None]:
    """Each training seed's checkpoint (its learner state checked finite first); None for a seed without."""
    if not loop.saves.enabled:
        return [None] * loop.axis.n_seeds
    verify_finite(loop)
    records = loop.episode_records()
    carry = loop.carry
    return loop.saves.write(kind, path_of, loop.host, carry.state, carry.buffer_state, records, with_buffer, compress)


def save_periodic(loop: LoopRun, with_buffer: bool | None, urgent: bool = False) -> list[Path | None]:
    """rl_model_<steps>_steps.zip; `urgent` (a stop was requested: seconds left) uncompressed."""
    steps = loop.host.env_steps
    return save(
        loop,
        "interrupt" if urgent else "checkpoint",
        lambda settings: settings.run_dir / f"rl_model_{steps}_steps.zip",
        with_buffer=with_buffer,
        compress=not urgent,
    )


def save_if_due(loop: LoopRun) -> list[Path | None]:
    """The periodic checkpoint when save_freq env steps have passed (the oldest beyond `keep` pruned)."""
    if not (loop.saves.enabled and loop.saves.periodic_due(loop.host.vector_steps)):
        return [None] * loop.axis.n_seeds
    written = save_periodic(loop, with_buffer=None)
    loop.saves.prune()
    return written


def save_final(loop: LoopRun) -> list[Path | None]:
    """<model_name>.zip of every training seed, and the statistics of `normalize` beside it."""
    written = save(loop, "final", lambda settings: settings.run_dir / f"{settings.model_name}.zip")
    if loop.saves.enabled:
        loop.saves.write_normalization(loop.host)
    return written


def save_after_failure(loop: LoopRun, error: RunFailure) -> list[str]:
    """The checkpoint a failure leaves each training seed to resume from; the notes saying where."""
    if not loop.saves.enabled:
        return []
    records = None if isinstance(error, EnvWorkerError) else loop.episode_records()
    carry = loop.carry
    return loop.saves.write_all_after_failure(
        loop.host, error, carry.state, carry.buffer_state, records, loop.guard.verified
    )
