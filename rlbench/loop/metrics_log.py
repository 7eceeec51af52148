"""What the loop reports while it runs: each seed's metrics row once log_interval more of its episodes
have ended (SB3's rhythm), and the progress bar with its rate and ETA."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

import numpy as np

from rlbench.config.entry import RunConfig
from rlbench.loggers.base import STEP_KEY
from rlbench.loop.divergence import verify_finite
from rlbench.loop.run_state import LoopRun

# SB3's keys, with SB3's meanings (README, "Metric keys"); eval/std_reward is rlbench's own.
ROLLOUT_METRICS = (
    "rollout/ep_rew_mean",
    "rollout/ep_len_mean",
    "time/episodes",
    "time/fps",
    "time/time_elapsed",
    STEP_KEY,
)
EVAL_METRICS = ("eval/mean_reward", "eval/std_reward", "eval/mean_ep_length", STEP_KEY)


def log_due(loop: LoopRun, start: float, start_steps: int) -> None:
    """Each training seed logs once log_interval more of its episodes have ended, or, on-policy, after every
    log_interval-th rollout's update (SB3's rhythms: OffPolicyAlgorithm's and OnPolicyAlgorithm's)."""
    run, host = loop.run, loop.host
    if run.log_interval <= 0:
        return
    iterations = rollouts_done(loop)
    if iterations is None:
        due = [
            index
            for index, seed in enumerate(host.seeds)
            if seed.failed is None
            and len(seed.episodes.finished_returns) - seed.episodes_at_last_log >= run.log_interval
        ]
    else:
        ends_a_logged_rollout = host.pending.count == 0 and iterations > 0 and iterations % run.log_interval == 0
        due = [index for index, seed in enumerate(host.seeds) if seed.failed is None] if ends_a_logged_rollout else []
    if not due:
        return
    for index in due:
        host.seeds[index].episodes_at_last_log = len(host.seeds[index].episodes.finished_returns)
    metrics = verify_finite(loop)
    elapsed = max(time.perf_counter() - start, 1e-9)
    # As SB3's: env steps (per seed, as a single run's) per second, and whole seconds since this process began
    # training, both integers as SB3 logs them.
    times = {"time/fps": int((host.env_steps - start_steps) / elapsed), "time/time_elapsed": int(elapsed)}
    if iterations is not None:
        times["time/iterations"] = iterations
    for index in due:
        seed = host.seeds[index]
        if seed.failed is None:
            values = {name: logged_value(name, value[index]) for name, value in metrics.items()}
            summary = seed.episodes.summary(run.stats_window_size)
            loop.loggers[index].log(summary | times | values | {STEP_KEY: host.env_steps}, host.env_steps)


COUNTS = ("train/n_updates",)  # SB3 logs these as integers; the host keeps every metric as float64


def logged_value(name: str, value: float) -> int | float:
    """A metric as SB3 logs it: a count as an int (700, not 700.0), anything else as a float."""
    return int(value) if name in COUNTS and np.isfinite(value) else float(value)


class TrainingRate:
    """Env steps per second and the time left, for the progress bar, measured from the end of the
    first training iteration: before it, random warm-up steps run far faster than training, and the
    iteration itself waits for compilation; either would make the rate and the ETA wrong for the run."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.start_steps: int | None = None
        self.start_time = 0.0

    def start(self, env_steps: int) -> None:
        self.start_steps, self.start_time = env_steps, self.clock()

    def rate(self, env_steps: int) -> float | None:
        if self.start_steps is None or env_steps == self.start_steps:
            return None
        return (env_steps - self.start_steps) / max(self.clock() - self.start_time, 1e-9)

    def eta(self, env_steps: int, total: int) -> float | None:
        rate = self.rate(env_steps)
        return None if rate is None else (total - env_steps) / rate


class ProgressBar:
    """rich's bar (nothing shown without `progress`): env steps of all seeds, rate, last evaluation, ETA."""

    def __init__(self, run: RunConfig, env_steps: int, n_seeds: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.run, self.n_seeds, self.rate = run, n_seeds, TrainingRate()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} steps/s"),
            TextColumn("last eval {task.fields[last_eval]}"),
            TextColumn("ETA {task.fields[eta]}"),
            disable=not run.progress,
        )
        self.task = self.progress.add_task(
            "training", total=run.n_timesteps, completed=env_steps, rate="-", eta="-", last_eval="-"
        )

    def __enter__(self) -> ProgressBar:
        self.progress.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.progress.__exit__(exc_type, exc, traceback)

    def trained(self, env_steps: int) -> None:
        if self.rate.start_steps is None:
            self.rate.start(env_steps)  # the first iteration, and its compilation, are behind us

    def evaluated(self, mean: float) -> None:
        self.progress.update(self.task, last_eval=f"{mean:.1f}")

    def advance(self, env_steps: int) -> None:
        if not self.run.progress:
            return
        rate, eta = self.rate.rate(env_steps), self.rate.eta(env_steps, self.run.n_timesteps)
        self.progress.update(
            self.task,
            completed=env_steps,
            rate="-" if rate is None else f"{rate * self.n_seeds:.0f}",  # env steps of all seeds
            eta="-" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta)),
        )


def rollouts_done(loop: LoopRun) -> int | None:
    """The rollouts collected so far, SB3's time/iterations (an on-policy learner trains on each one); None for
    an off-policy learner."""
    if not loop.programs.learner.collection.stages_rollout:
        return None
    return loop.host.env_steps // loop.schedule.staging_capacity
