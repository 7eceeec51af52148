"""Collecting experience, one vector step at a time: act, step the envs, stage the transitions.

The actions are the warm-up's uniform random ones, the one the last training iteration already chose
(it acts on the next observations with the updated actor, in the same device call), or a call to act.
Staged transitions wait on the host (`PendingTransitions`) until a training iteration takes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlbench.envs.make import final_observations, step_vector_env
from rlbench.envs.reported import ReportedEpisodes, reported_episodes
from rlbench.loop.divergence import finite_actions
from rlbench.loop.host_fetch import fetch_polling
from rlbench.loop.run_state import LoopRun


@dataclass(frozen=True)
class VectorStep:
    """What one vector step returned, by seed ([n_seeds, n_envs, ...]): next_obs is the observation each
    env continues from (a new episode's first after an end), final_obs the one each transition ends in."""

    next_obs: np.ndarray
    final_obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    # The episodes the envs reported themselves (Atari's games, rlbench.envs.reported), by seed; None: the agent's
    # episodes are the episodes.
    reported: ReportedEpisodes | None = None


def act(loop: LoopRun) -> np.ndarray:
    """The actions for every env of every seed, [n_seeds, n_envs, action_dim] on the host."""
    host, axis, programs = loop.host, loop.axis, loop.programs
    if loop.schedule.random_actions(host):
        shape = (loop.run.n_envs, loop.spec.action_dim)
        return np.stack([seed.warmup_rng.uniform(-1.0, 1.0, shape).astype(np.float32) for seed in host.seeds])
    if host.next_action is not None:  # from the last training iteration
        action = axis.host(host.next_action)
    else:
        if loop.schedule.resample_due(host):  # gSDE: new exploration matrices
            loop.state = programs.resample_exploration(loop.state)
        obs, normalization = loop.policy_inputs()
        device_action, exploration, host.act_key = programs.act(
            loop.state, obs, host.act_key, episode_starts(loop), normalization, loop.progress_remaining()
        )
        if exploration is not None:  # the algorithm keeps an exploration state (None: nothing to put back)
            loop.state = loop.state.replace(exploration=exploration)
        action = axis.host(fetch_polling(device_action))  # a short call: polled, not slept on
    return finite_actions(loop, action)


def episode_starts(loop: LoopRun) -> np.ndarray | None:
    """[n_seeds, n_envs] bool on the device: the envs whose current observation begins an episode (none of its
    steps taken); None when the algorithm's acting does not read them (no transfer)."""
    if not loop.programs.learner.acting.reads_episode_starts:
        return None
    return loop.axis.device(np.stack([seed.episodes.lengths == 0 for seed in loop.host.seeds]))


def step(loop: LoopRun, action: np.ndarray) -> VectorStep:
    """Step every env once (a failing env raises EnvWorkerError); the action is then spent.

    The envs get the action clipped to [-1, 1], their rescaled Box: an on-policy Gaussian's sample is
    unbounded, and as SB3's PPO it is clipped for the env while the rollout keeps the sample (every other
    learner's actions are in [-1, 1] already; a Discrete index is passed as it is)."""
    env = loop.env
    assert env is not None, "the host loop steps its envs (the device loop's are on the device)"
    loop.host.next_action = None
    env_action = action.reshape(env.num_envs, -1)
    if not loop.spec.discrete:
        env_action = np.clip(env_action, -1.0, 1.0)
    next_obs, reward, terminated, truncated, infos = step_vector_env(env, env_action)
    done = terminated | truncated
    final_obs = final_observations(next_obs, infos, done)
    by_seed = loop.by_seed
    reported = None
    if loop.reports_episodes:
        reported = ReportedEpisodes(*map(by_seed, reported_episodes(infos, env.num_envs)))
    return VectorStep(
        by_seed(next_obs),
        by_seed(final_obs),
        by_seed(reward),
        by_seed(terminated),
        by_seed(truncated),
        by_seed(done),
        reported,
    )


def stage(loop: LoopRun, action: np.ndarray, step: VectorStep) -> None:
    """Stage the transitions for the next training iteration and move on: observations, the statistics of
    `normalize`, the counters, each env's episode (finished ones to the Monitor files)."""
    host = loop.host
    if host.normalizer is not None and loop.programs.learner.collection.stages_rollout:
        staged_step_as_seen(loop, action, step)
    else:
        host.pending.add(host.obs, action, step.reward, step.final_obs, step.terminated, step.truncated)
        if host.normalizer is not None:
            host.normalizer.observe_step(step.next_obs, step.reward, step.done)
    host.obs = step.next_obs
    host.env_steps += loop.run.n_envs
    host.vector_steps += 1
    for index, seed in enumerate(host.seeds):
        monitor = loop.monitors[index] if seed.failed is None else None
        reported = None if step.reported is None else ReportedEpisodes(*(field[index] for field in step.reported))
        ended = seed.episodes.step(step.reward[index], step.done[index], reported=reported)
        for env_index, episode_return, length in ended:
            if monitor is not None:
                monitor.episode(env_index, episode_return, length)


def staged_step_as_seen(loop: LoopRun, action: np.ndarray, step: VectorStep) -> None:
    """An on-policy rollout's step with `normalize`, as SB3's VecNormalize gives it to PPO: the observation the
    policy acted on, scaled with the statistics it acted with; then the statistics move with this step, and
    the reward and the observation the step ended in are scaled with the moved ones."""
    normalizer, pending = loop.host.normalizer, loop.host.pending
    assert normalizer is not None, "a step is staged as seen only with `normalize`"
    obs = normalizer.scaled_obs(loop.host.obs)  # the very array the policy acted on (LoopRun.policy_inputs)
    normalizer.observe_step(step.next_obs, step.reward, step.done)
    # Where no episode ended the final observations are the next ones, scaled once; the next ones are scaled last,
    # so that the array the next step's policy acts on is the one scaled_obs keeps.
    ended_obs = normalizer.scaled_obs(step.final_obs) if step.done.any() else None
    next_obs = normalizer.scaled_obs(step.next_obs)
    final_obs = next_obs if ended_obs is None else ended_obs
    pending.add(obs, action, normalizer.scaled_rewards(step.reward), final_obs, step.terminated, step.truncated)
