"""Deterministic evaluation on a separate vector env, counted in whole episodes (as SB3's evaluate_policy),
and the loop's evaluations when they fall due: every seed's policy at once, each seed's results recorded
(evaluations.npz, its logger) and a new best model saved."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from gymnasium.vector import VectorEnv

from rlbench.envs.make import step_vector_env
from rlbench.envs.reported import reported_episodes
from rlbench.errors import EvaluationError
from rlbench.loggers.base import STEP_KEY
from rlbench.loop.divergence import verify_finite
from rlbench.loop.host_fetch import fetch_polling
from rlbench.loop.run_state import LoopRun
from rlbench.types import PyTree

EVAL_SEED_OFFSET = 10_000  # eval envs never share seeds with training envs


@dataclass(frozen=True)
class EvalResult:
    returns: np.ndarray  # [n_episodes]
    lengths: np.ndarray  # [n_episodes]

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def std(self) -> float:
        return float(self.returns.std())


def evaluate(
    policy: Callable[[np.ndarray], np.ndarray],
    env: VectorEnv,
    n_episodes: int,
    seed: int | None = None,
    reports: bool = False,
) -> EvalResult:
    """Run `n_episodes` full episodes, spread over the envs so that no env biases toward short episodes.

    Env i runs (n_episodes + i) // n_envs episodes; extra episodes an env finishes are discarded.
    """
    seeds = None if seed is None else [seed + i for i in range(env.num_envs)]  # as env.reset(seed=seed) seeds them
    return evaluate_groups(policy, env, 1, n_episodes, seeds, reports=reports)[0]


class EvaluationStopped(Exception):
    """A stop was requested during an evaluation (`evaluate_groups`' `stop_requested`)."""


def evaluate_groups(
    policy: Callable[[np.ndarray], np.ndarray],
    env: VectorEnv,
    n_groups: int,
    n_episodes: int,
    env_seeds: list[int] | None = None,
    stop_requested: Callable[[], str | None] | None = None,
    reports: bool = False,
) -> list[EvalResult]:
    """`evaluate` for `n_groups` policies at once (the seeds of a run): the env's envs are split into
    n_groups equal, consecutive groups, and `policy` maps the observations of all envs to their actions.
    Each group runs `n_episodes` episodes, spread over its envs as `evaluate` spreads them. `env_seeds`
    seeds each env's first episode. EvaluationStopped when `stop_requested()` says so before a step. With
    `reports` the episodes are those the envs report themselves (rlbench.envs.reported: Atari's games)."""
    n_envs = env.num_envs // n_groups
    targets = np.tile([(n_episodes + i) // n_envs for i in range(n_envs)], n_groups)
    counts = np.zeros(env.num_envs, dtype=int)
    episode_return = np.zeros(env.num_envs)
    episode_length = np.zeros(env.num_envs, dtype=int)
    returns: list[list[float]] = [[] for _ in range(n_groups)]
    lengths: list[list[int]] = [[] for _ in range(n_groups)]
    obs, _ = env.reset(seed=env_seeds)  # type: ignore[arg-type]  # one seed per env (VectorEnv types one)
    while (counts < targets).any():
        if stop_requested is not None and stop_requested():
            raise EvaluationStopped
        obs, reward, terminated, truncated, infos = step_vector_env(env, policy(obs))
        episode_return += reward
        episode_length += 1
        done = terminated | truncated
        ended = [(i, float(episode_return[i]), int(episode_length[i])) for i in np.flatnonzero(done)]
        episode_return[done], episode_length[done] = 0.0, 0
        if reports:  # the envs' own episodes (Atari's games), not the agent's
            games = reported_episodes(infos, env.num_envs)
            ended = [(i, float(games.returns[i]), int(games.lengths[i])) for i in np.flatnonzero(games.ended)]
        for i, episode_return_i, length in ended:
            if counts[i] < targets[i]:
                returns[i // n_envs].append(episode_return_i)
                lengths[i // n_envs].append(length)
                counts[i] += 1
    return [EvalResult(returns=np.array(r), lengths=np.array(n)) for r, n in zip(returns, lengths, strict=True)]


def evaluate_seeds(loop: LoopRun, stop_requested: Callable[[], str | None] | None) -> list[EvalResult | None] | None:
    """Every seed's policy at once on its own eval envs; the results of the seeds that train (None for
    a frozen one) are recorded, logged and checked for a new best model. None, with nothing recorded, when
    a stop is requested before it ends."""
    run, host, axis, n_seeds = loop.run, loop.host, loop.axis, loop.axis.n_seeds
    assert loop.eval_env is not None, "run_loop evaluates a run with eval envs only"
    verify_finite(loop)  # a diverged policy is not worth evaluating, nor a best_model
    eval_seeds = eval_env_seeds(loop)
    normalization = loop.normalization()  # frozen: evaluation reads the statistics, never updates them

    def policy(obs: np.ndarray, state: PyTree = loop.state) -> np.ndarray:
        obs = axis.device(obs.reshape(n_seeds, run.n_eval_envs, -1))
        actions = loop.programs.act_deterministic(state, obs, normalization)
        return axis.host(fetch_polling(actions)).reshape(len(obs), -1)

    try:
        results = evaluate_groups(
            policy, loop.eval_env, n_seeds, run.eval_episodes, eval_seeds, stop_requested, loop.reports_episodes
        )
    except EvaluationStopped:
        return None
    except Exception as error:
        raise EvaluationError(f"evaluation at env step {host.env_steps} failed: {error}") from error
    return record_evaluations(loop, results)


def eval_env_seeds(loop: LoopRun) -> list[int]:
    """Each eval env's seed for this evaluation, seed after seed: never a training env's, new each time."""
    return [
        seed.seed + EVAL_SEED_OFFSET + len(seed.evaluations.timesteps) + j
        for seed in loop.host.seeds
        for j in range(loop.run.n_eval_envs)
    ]


def record_evaluations(loop: LoopRun, results: list[EvalResult]) -> list[EvalResult | None]:
    """Each training seed's result recorded (None for a frozen seed), after checking its returns are finite."""
    run, host, axis = loop.run, loop.host, loop.axis
    recorded: list[EvalResult | None] = []
    for index, (seed, result) in enumerate(zip(host.seeds, results, strict=True)):
        if seed.failed is not None:  # a frozen policy's scores are not the seed's any more
            recorded.append(None)
            continue
        if not np.isfinite(result.returns).all():
            raise EvaluationError(
                f"evaluation at env step {host.env_steps} returned non-finite episode returns "
                f"{result.returns.tolist()} from a finite policy: check the env's rewards"
            )
        record_evaluation(loop, index, result)
        recorded.append(result)
    if run.verbose and axis.batched:  # one line for all seeds; one seed prints its own
        means = [result.mean for result in recorded if result is not None]
        print(
            f"Eval num_timesteps={host.env_steps}, episode_reward over {len(means)} seeds: "
            f"mean {np.mean(means):.2f}, min {np.min(means):.2f}, max {np.max(means):.2f}",
            flush=True,  # a log file that someone tails, or a test waits on
        )
    return recorded


def eval_metrics(result: EvalResult) -> dict[str, float]:
    """The eval/ metrics an evaluation logs: a scheduled one (the loop) and the final one (rlbench.run.final_eval)."""
    return {
        "eval/mean_reward": result.mean,
        "eval/std_reward": result.std,
        "eval/mean_ep_length": float(result.lengths.mean()),
    }


def record_evaluation(loop: LoopRun, index: int, result: EvalResult) -> None:
    """Seed `index`'s evaluation into its evaluations.npz and logger; its best model when it is a new best."""
    run, host, seed, output = loop.run, loop.host, loop.host.seeds[index], loop.outputs[index]
    seed.evaluations.append(host.env_steps, result.returns, result.lengths)
    if output.run_dir is not None:
        seed.evaluations.save(output.run_dir / "evaluations.npz")
    loop.loggers[index].log({**eval_metrics(result), STEP_KEY: host.env_steps}, host.env_steps)
    single = not loop.axis.batched
    if run.verbose and single:
        print(f"Eval num_timesteps={host.env_steps}, episode_reward={result.mean:.2f} +/- {result.std:.2f}", flush=True)
    if result.mean <= seed.best_mean_reward:
        return
    seed.best_mean_reward = result.mean
    if output.checkpoints is not None:
        if run.verbose and single:
            print("New best mean reward!")
        # Checked finite at the start of the evaluation; no buffer, no episode records needed.
        state = loop.axis.take(loop.state, index)
        path = output.checkpoints.run_dir / "best_model.zip"
        loop.saves.write_seed(path, "best", host, index, state, None, loop.episode_records())
