"""One seed trained in this process, as a test wants it: rlbench.loop.runner.train_seeds with a single
SeedOutput (a one-seed run has no seed axis on the device: its state and buffer are exactly a single
learner's). rlbench itself trains through rlbench.run.launch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlbench.config.algorithm import Algorithm
from rlbench.config.entry import RunConfig
from rlbench.loggers.base import Logger
from rlbench.loop.evaluation import EvalResult
from rlbench.loop.run_state import SeedOutput, TrainResult
from rlbench.loop.runner import train_seeds
from rlbench.loop.saving import CheckpointSettings
from rlbench.store.checkpoint import Checkpoint


def train(
    run: RunConfig,
    algo: Algorithm,
    cfg: Any,
    make_logger: Callable[[Sequence[str]], Logger],
    run_dir: Path | None = None,
    on_eval: Callable[[int, EvalResult], None] | None = None,
    on_iteration: Callable[[int, Any], None] | None = None,
    checkpoints: CheckpointSettings | None = None,
    resume: Checkpoint | None = None,
    stop_requested: Callable[[], str | None] | None = None,
) -> TrainResult:
    """Train one seed (`run.seed`)."""
    return train_seeds(
        run,
        algo,
        cfg,
        [SeedOutput(make_logger, run_dir, checkpoints)],
        on_eval=None if on_eval is None else lambda env_steps, results: on_eval(env_steps, results[0]),
        on_iteration=on_iteration,
        resume=None if resume is None else [resume],
        stop_requested=stop_requested,
    )
