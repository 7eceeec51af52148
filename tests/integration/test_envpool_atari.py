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


def test_the_device_loop_on_envpool_atari_computes_what_the_host_loop_computes():
    """DQN with CnnPolicy on Breakout's pool (36x36 frames, 2 stacked, episodic life), the host loop on the pool in
    same-step mode and the device loop on its XLA interface, the same learner and seed: every buffer row (frames
    included, as uint8) and the Q-network equal, and the same games counted (raw scores summed over each game's
    lives, lengths in agent steps), not the agent's one-life episodes."""
    import jax

    from rlbench.config.entry import RunConfig
    from rlbench.config.registry import ALGORITHMS
    from rlbench.loop.device.runner import train_seeds_on_device
    from rlbench.loop.run_state import SeedOutput
    from tests.integration.test_device_loop import NO_LOG
    from tests.integration.test_dqn_loops import TINY
    from tests.loop_runs import train

    entry = {"env_wrapper": [{ATARI: {"screen_size": 36}}], "frame_stack": 2}
    run = RunConfig(env_id=BREAKOUT, n_timesteps=640, seed=3, eval_freq=-1, env_wrappers=wrappers(entry))
    features = {"features_extractor_kwargs": {"features_dim": 16}, "net_arch": [16]}
    cfg = ALGORITHMS["dqn"].build_config({**TINY, "policy": "CnnPolicy", "policy_kwargs": features}, 1, "test")
    on_host = train(run, ALGORITHMS["dqn"], cfg, NO_LOG)
    on_device = train_seeds_on_device(RunConfig(**{**run.__dict__, "vec_env": "envpool-xla"}), ALGORITHMS["dqn"],
                                      cfg, [SeedOutput(NO_LOG)])  # fmt: skip
    host_buffer, device_buffer = on_host.buffer_state, on_device.buffer_state
    assert int(device_buffer.size) == int(host_buffer.size) == 640
    assert device_buffer.pixels.dtype == np.uint8 and device_buffer.pixels.shape[1] == 2 * 36 * 36 * 2
    np.testing.assert_array_equal(np.asarray(device_buffer.pixels), np.asarray(host_buffer.pixels))
    np.testing.assert_array_equal(np.asarray(device_buffer.rows), np.asarray(host_buffer.rows))
    assert np.asarray(host_buffer.rows)[:, -1].sum() >= 5  # lives lost: terminations of the agent's episodes
    host_q, device_q = jax.tree.leaves(on_host.state.q), jax.tree.leaves(on_device.state.q)
    for host_leaf, device_leaf in zip(host_q, device_q, strict=True):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-4, atol=1e-5)
    host_games, device_games = on_host.host.seeds[0].episodes, on_device.host.seeds[0].episodes
    assert device_games.finished_lengths == host_games.finished_lengths
    assert device_games.finished_returns == host_games.finished_returns
    assert len(host_games.finished_lengths) >= 2 and min(host_games.finished_lengths) >= 100  # games, not lives


@pytest.mark.slow  # the DQN test above covers frames and games on the XLA interface; this adds pools of one env
def test_ppo_on_envpool_atari_s_device_loop_stages_what_the_host_loop_stages():
    """PPO with CnnPolicy on two envs of Breakout's pool (a pool each on the device loop): every staged rollout row
    (frames as uint8, lives lost as terminations) and the parameters after two updates equal the host loop's."""
    import jax

    from rlbench.config.entry import RunConfig
    from rlbench.config.registry import ALGORITHMS
    from rlbench.loop.device.runner import train_seeds_on_device
    from rlbench.loop.run_state import SeedOutput
    from tests.conftest import ppo_config
    from tests.integration.test_device_loop import NO_LOG
    from tests.loop_runs import train

    entry = {"env_wrapper": [{ATARI: {"screen_size": 36}}], "frame_stack": 2}
    run = RunConfig(env_id=BREAKOUT, n_timesteps=2 * 2 * 48 + 2 * 16, n_envs=2, seed=4, eval_freq=-1,
                    env_wrappers=wrappers(entry))  # fmt: skip
    features = {"features_extractor_kwargs": {"features_dim": 16}, "net_arch": {"pi": [16], "vf": [16]}}
    cfg = ppo_config(policy="CnnPolicy", n_steps=48, batch_size=32, policy_kwargs=features)
    on_host = train(run, ALGORITHMS["ppo"], cfg, NO_LOG)
    on_device = train_seeds_on_device(RunConfig(**{**run.__dict__, "vec_env": "envpool-xla"}), ALGORITHMS["ppo"],
                                      cfg, [SeedOutput(NO_LOG)])  # fmt: skip
    host_rows, device_rows = on_host.host.pending, on_device.host.pending
    assert host_rows.count == device_rows.count == 32 and device_rows.obs.dtype == np.uint8  # 16 steps of 2 envs
    for name in ("obs", "action", "reward", "next_obs", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(device_rows, name)[:, :32], getattr(host_rows, name)[:, :32], name)
    for host_leaf, device_leaf in zip(
        jax.tree.leaves(on_host.state.policy.params), jax.tree.leaves(on_device.state.policy.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def device_loop_logs(tmp_path_factory):
    """RL Zoo's atari DQN entry on Breakout's pool through train.py with the device loop, acting only."""
    from rlbench.cli.train import main

    logs = tmp_path_factory.mktemp("atari_device_loop")
    argv = ["--algo", "dqn", "--env", BREAKOUT, "--vec-env", "envpool-xla", "-n", "600", "--eval-freq", "600"]
    argv += ["--eval-episodes", "2", "-f", str(logs), "--seed", "1", "--verbose", "0"]
    assert main([*argv, "-params", "learning_starts:5000", "buffer_size:1000"]) == 0
    return logs


def test_the_device_loop_counts_games_in_the_monitor_file_and_evaluations(device_loop_logs):
    run = device_loop_logs / "dqn" / "envpool_Breakout-v5_1"
    with (run / "0.monitor.csv").open() as file:
        games = list(csv.DictReader(line for line in file if not line.startswith("#")))
    assert 1 <= len(games) <= 600 // 100 and all(int(game["l"]) >= 100 for game in games), games
    assert all(float(game["r"]) == int(float(game["r"])) >= 0 for game in games)  # raw scores: Breakout's bricks
    evaluations = np.load(run / "evaluations.npz")
    assert evaluations["ep_lengths"].shape == (1, 2) and (evaluations["ep_lengths"] >= 100).all()


def test_enjoy_records_an_envpool_atari_model_on_ale_py_s_game(device_loop_logs, tmp_path, capsys):
    """EnvPool draws no frames: enjoy.py --record plays the model on ale-py's NoFrameskip-v4 of the same game, which
    the run's AtariWrapper and frame_stack preprocess into the frames the policy was trained on."""
    from rlbench.cli.enjoy import main as enjoy
    from tests.integration.test_enjoy import read_video

    video = tmp_path / "breakout.mp4"
    argv = ["--algo", "dqn", "--env", BREAKOUT, "-f", str(device_loop_logs), "-n", "30", "--record", str(video)]
    assert enjoy(argv) == 0
    assert "playing gymnasium's BreakoutNoFrameskip-v4, the same game" in capsys.readouterr().err
    frames = read_video(video)
    assert len(frames) == 30 and frames[0].shape[:2] == (210, 160)  # ALE's own screen, not the 84x84 frames
