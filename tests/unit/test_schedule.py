"""rlbench.loop.schedule: when the loop trains and when gSDE resamples, on hand-counted host states."""

import jax
import numpy as np
import pytest

from rlbench.algos.common.fused import VARIABLE_STEPS_PER_UPDATE
from rlbench.algos.sac.update import make_learner
from rlbench.loop.saving import new_host_state
from rlbench.loop.schedule import TrainSchedule
from rlbench.networks.actor import GSDEConfig
from rlbench.types import EnvSpec
from tests.conftest import tiny_sac_config


def schedule_of(cfg, n_envs: int, n_seeds: int) -> TrainSchedule:
    return TrainSchedule(cfg, make_learner(cfg, EnvSpec(obs_dim=3, action_dim=1)), n_envs, n_seeds)


def host_with(schedule: TrainSchedule, env_steps: int, finished_lengths=(), running_length=0, staged=0):
    spec = EnvSpec(obs_dim=3, action_dim=1)
    obs = np.zeros((1, schedule.n_envs, spec.obs_dim), np.float32)
    host = new_host_state([0], obs, jax.random.key(0), spec, schedule.cfg.learning_starts, schedule.staging_capacity)
    host.env_steps = env_steps
    host.seeds[0].episodes.finished_lengths = list(finished_lengths)
    host.seeds[0].episodes.lengths[0] = running_length
    host.pending.count = staged
    return host


def test_train_freq_in_episodes_trains_at_every_second_episode_end_in_calls_of_one_compiled_length():
    """train_freq (2, episode), gradient_steps -1: at the end of the 2nd, 4th, ... episode, as many gradient
    steps as the rollout's two episodes had env steps (80 + 50 = 130), in calls of 64 (64, 64, 2)."""
    schedule = schedule_of(tiny_sac_config(train_freq=2, train_freq_unit="episode", gradient_steps=-1), 1, 1)
    assert schedule.staging_capacity == 1 and VARIABLE_STEPS_PER_UPDATE == 64
    host = host_with(schedule, env_steps=250, finished_lengths=[100, 70, 80])
    assert schedule.gradient_step_calls(host, episode_ended=True) == []  # the 3rd episode: mid-rollout
    host.seeds[0].episodes.finished_lengths.append(50)
    assert schedule.gradient_step_calls(host, episode_ended=False) == []
    assert schedule.gradient_step_calls(host, episode_ended=True) == [64, 64, 2]
    assert not schedule.fused_update_due(host)  # episodic: never the fused update
    host.env_steps = host.update_start  # training has not started (not more than learning_starts yet)
    assert schedule.gradient_step_calls(host, episode_ended=True) == []


def test_fixed_gradient_steps_per_episode_rollout_and_steps_into_it_for_gsde():
    cfg = tiny_sac_config(train_freq=2, train_freq_unit="episode", gradient_steps=3, gsde=GSDEConfig(sample_freq=4))
    schedule = schedule_of(cfg, 1, 1)
    host = host_with(schedule, env_steps=1000, finished_lengths=[10, 20, 30], running_length=5)
    assert schedule.vector_steps_in_rollout(host) == 30 + 5  # the rollout's finished episode and the running one
    assert not schedule.resample_due(host)  # 35 % 4 != 0
    host.seeds[0].episodes.finished_lengths.append(7)
    assert schedule.gradient_step_calls(host, episode_ended=True) == [3]
    host.seeds[0].episodes.lengths[0] = 0
    assert schedule.vector_steps_in_rollout(host) == 0 and schedule.resample_due(host)  # a rollout starts


@pytest.mark.parametrize(("sample_freq", "due_at"), [(-1, [0]), (2, [0, 2])])
def test_gsde_resamples_at_each_rollout_start_and_every_sample_freq_steps_into_it(sample_freq, due_at):
    """train_freq 4 vector steps of 2 envs: the staged transitions count the rollout's steps (2 per step)."""
    schedule = schedule_of(tiny_sac_config(train_freq=4, gsde=GSDEConfig(n_envs=2, sample_freq=sample_freq)), 2, 1)
    assert schedule.staging_capacity == 8
    due = [n for n in range(4) if schedule.resample_due(host_with(schedule, 500, staged=2 * n))]
    assert due == due_at


def test_random_actions_before_learning_starts_unless_gsde_explores_at_warmup_and_the_fused_update_after():
    schedule = schedule_of(tiny_sac_config(learning_starts=100), 1, 1)
    assert schedule.random_actions(host_with(schedule, 99)) and not schedule.random_actions(host_with(schedule, 100))
    assert not schedule.fused_update_due(host_with(schedule, 100)) and schedule.fused_update_due(
        host_with(schedule, 101)
    )
    at_warmup = schedule_of(tiny_sac_config(learning_starts=100, gsde=GSDEConfig(at_warmup=True)), 1, 1)
    assert not at_warmup.random_actions(host_with(at_warmup, 0))


def test_train_freq_in_episodes_takes_one_seed():
    with pytest.raises(ValueError, match="one seed per run"):
        schedule_of(tiny_sac_config(train_freq_unit="episode"), 1, 2)
