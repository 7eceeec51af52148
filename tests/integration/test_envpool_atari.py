"""Atari on EnvPool (`--env envpool:Breakout-v5`): RL Zoo's AtariWrapper and frame_stack as the pool's own options,
frame stacks channels last, lives continued within a game (EnvPool's reset step, not a new game), the games reported
with their raw scores, and RL Zoo's `atari` entry through train.py."""

import csv

import numpy as np
import pytest

from rlbench.config.entry import entry_env_wrappers
from rlbench.envs.envpool_atari import ATARI_DEFAULTS, pool_kwargs
from rlbench.envs.wrappers import trusted_modules
from rlbench.errors import ConfigError

envpool = pytest.importorskip("envpool")
pytest.importorskip("ale_py")

ATARI = "stable_baselines3.common.atari_wrappers.AtariWrapper"
BREAKOUT = "envpool:Breakout-v5"


def wrappers(entry):
    return entry_env_wrappers(entry, trusted_modules(), "test")


def test_the_atari_wrapper_and_frame_stack_become_the_pools_options():
    default = pool_kwargs(BREAKOUT, wrappers({"env_wrapper": [ATARI], "frame_stack": 4}), {})
    assert default == {**ATARI_DEFAULTS, "stack_num": 4}
    assert default["episodic_life"] and default["reward_clip"] and default["noop_max"] == 30
    custom = {ATARI: {"terminal_on_life_loss": False, "clip_reward": False, "screen_size": 64, "frame_skip": 2}}
    options = pool_kwargs(BREAKOUT, wrappers({"env_wrapper": [custom]}), {"max_episode_steps": 100})
    assert (options["episodic_life"], options["reward_clip"], options["frame_skip"]) == (False, False, 2)
    assert (options["img_height"], options["img_width"], options["stack_num"]) == (64, 64, 1)
    assert options["max_episode_steps"] == 100  # --env-kwargs over the wrapper's
    assert pool_kwargs(BREAKOUT, (), {"stack_num": 2}) == {"stack_num": 2}  # no wrapper: the kwargs as given


@pytest.mark.parametrize(
    "env_id,entry,message",
    [
        (BREAKOUT, {"env_wrapper": ["gymnasium.wrappers.ClipReward"]}, r"EnvPool's C\+\+ threads, which gymnasium"),
        ("envpool:Pendulum-v1", {"env_wrapper": [ATARI]}, "AtariWrapper wraps Atari games; envpool:Pendulum-v1"),
        (BREAKOUT, {"env_wrapper": [{ATARI: {"noop": 3}}]}, "AtariWrapper has no argument 'noop'"),
        (BREAKOUT, {"frame_stack": 4}, "frame_stack: envpool:Breakout-v5 stacks frames only as"),
    ],
)
def test_what_a_pool_cannot_do_is_refused(env_id, entry, message):
    with pytest.raises(ConfigError, match=message):
        pool_kwargs(env_id, wrappers(entry), {})


def test_the_pool_steps_as_envpools_own_with_lives_continued_and_games_reported():
    """The same seed and actions as EnvPool's pool stepped by hand (its reset step after each end dropped): the same
    frames (channels last, flat), the same ends; a life lost continues the game (reset(ids) would start a new one
    at 5 lives); each game reported with the sum of EnvPool's raw rewards over its lives, its length in agent steps."""
    from rlbench.envs.envpool_vector import EnvPoolVectorEnv

    options = {**ATARI_DEFAULTS, "stack_num": 2}
    ours = EnvPoolVectorEnv(BREAKOUT, 1, options, report_games=True)
    ours.reset(seed=3)
    raw = envpool.make_gymnasium("Breakout-v5", num_envs=1, batch_size=1, seed=3, **options)
    raw.reset()
    assert ours.single_observation_space.image_shape == (84, 84, 2)
    rng, reset_step, score, length, lives, games = np.random.default_rng(0), False, 0.0, 0, [], []
    for _ in range(900):
        action = int(rng.integers(0, 4))
        if reset_step:  # EnvPool's own reset step: it ignores the action
            raw.step(np.zeros(1, np.int32))
        frames, _, terminated, truncated, info = raw.step(np.array([action], np.int32))
        obs, _, our_terminated, _, infos = ours.step(np.array([[float(action)]], np.float32))
        ended = bool(terminated[0] or truncated[0])
        shown = infos["final_obs"][0] if ended else obs[0]
        np.testing.assert_array_equal(shown, frames[0].transpose(1, 2, 0).reshape(-1))
        assert bool(our_terminated[0]) == bool(terminated[0])
        score, length, reset_step = score + float(info["reward"][0]), length + 1, ended
        if ended:
            lives.append(int(info["lives"][0]))
        if info["terminated"][0]:  # the game over
            assert infos["final_info"]["_episode"][0]
            games.append((infos["final_info"]["episode"]["r"][0], infos["final_info"]["episode"]["l"][0]))
            assert games[-1] == (score, length)
            score, length = 0.0, 0
        else:
            assert "final_info" not in infos
    assert lives[:5] == [4, 3, 2, 1, 0] and len(games) >= 2  # five lives in one game, then the next game
    assert sum(score for score, _ in games) > 0


def test_train_py_takes_the_atari_entry_on_envpool_and_counts_games(tmp_path, capsys):
    from rlbench.cli.train import main

    argv = ["--algo", "dqn", "--env", BREAKOUT, "-n", "600", "--eval-freq", "600", "--eval-episodes", "1"]
    assert main([*argv, "-f", str(tmp_path), "--seed", "1", "-params", "learning_starts:5000", "buffer_size:1000"]) == 0
    assert "Using the 'atari' entry of" in capsys.readouterr().out
    run = tmp_path / "dqn" / "envpool_Breakout-v5_1"
    with (run / "0.monitor.csv").open() as file:
        games = list(csv.DictReader(line for line in file if not line.startswith("#")))
    # Random play loses Breakout's 5 lives in about 120 agent steps or more: whole games, not lives of ~24 steps.
    assert 1 <= len(games) <= 600 // 100 and all(int(game["l"]) >= 100 for game in games), games
    assert np.load(run / "evaluations.npz")["ep_lengths"][0][0] >= 100
