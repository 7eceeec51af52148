"""rlbench's SB3 AtariWrapper (rlbench/envs/atari.py), each behaviour checked against the real ALE run by hand:
a raw frameskip=1 env with the same seed, stepped frame by frame as the wrapper should."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")
cv2 = pytest.importorskip("cv2")

from rlbench.envs.atari import (  # noqa: E402  (after the skip: the module needs the atari extra's packages)
    AtariWrapper,
    FireReset,
    is_atari,
    looks_atari,
    register_atari_envs,
)
from rlbench.envs.episode_restore import episode_records, restore_episodes  # noqa: E402
from rlbench.envs.make import make_single_env, make_vector_env  # noqa: E402
from rlbench.envs.reported import reported_episodes  # noqa: E402
from rlbench.envs.wrappers import parse_env_wrappers, trusted_modules  # noqa: E402
from rlbench.errors import ConfigError  # noqa: E402

gym.register_envs(ale_py)
BREAKOUT, PONG = "BreakoutNoFrameskip-v4", "PongNoFrameskip-v4"
NOOP, FIRE = 0, 1
SB3_NAME = "stable_baselines3.common.atari_wrappers.AtariWrapper"


def warp(frame):
    """SB3's WarpFrame by hand: grey, 84x84 with INTER_AREA, one channel last."""
    grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    return cv2.resize(grey, (84, 84), interpolation=cv2.INTER_AREA)[:, :, None]


def hand_reset(env_id, seed, noop_max=30, fire=True):
    """The raw env reset as the wrapper resets it: the NOOP count drawn from np_random after the reset, the
    NOOPs, then FIRE and action 2 one frame each (frame_skip=1). Returns (raw env, NOOP count, last frame)."""
    raw = gym.make(env_id)
    frame, _ = raw.reset(seed=seed)
    noops = int(raw.unwrapped.np_random.integers(1, noop_max + 1))
    for action in [NOOP] * noops + ([FIRE, 2] if fire else []):
        frame, _, terminated, truncated, _ = raw.step(action)
        assert not (terminated or truncated)
    return raw, noops, frame


def hand_step(raw, action, skip=4):
    """One agent step by hand: `skip` frames, rewards summed, the max of the last two frames."""
    frames, total, terminated, truncated = [], 0.0, False, False
    for _ in range(skip):
        frame, reward, terminated, truncated, _ = raw.step(action)
        frames.append(frame)
        total += reward
        if terminated or truncated:
            break
    return np.maximum(*frames[-2:]) if len(frames) > 1 else frames[0], total, terminated, truncated


def test_observation_space_is_84x84_grey_uint8():
    env = AtariWrapper(gym.make(BREAKOUT))
    assert env.observation_space == gym.spaces.Box(0, 255, (84, 84, 1), np.uint8)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8 and env.observation_space.contains(obs)
    assert env.observation_space.contains(env.step(NOOP)[0])


def test_noop_reset_draws_its_count_from_the_seed():
    counts = []
    for seed in range(6):
        env = AtariWrapper(gym.make(BREAKOUT), frame_skip=1, terminal_on_life_loss=False)
        obs, info = env.reset(seed=seed)
        _, noops, frame = hand_reset(BREAKOUT, seed)
        np.testing.assert_array_equal(obs, warp(frame))
        assert info["episode_frame_number"] == noops + 2  # the NOOPs, FIRE and action 2, one frame each
        assert 1 <= noops <= 30
        counts.append(noops)
    assert len(set(counts)) > 1  # drawn, not fixed
    small = AtariWrapper(gym.make(BREAKOUT), noop_max=3, frame_skip=1, terminal_on_life_loss=False)
    assert 1 <= small.reset(seed=0)[1]["episode_frame_number"] - 2 <= 3


def test_frame_skip_max_pools_the_last_two_frames_and_sums_rewards():
    # Pong with NOOPs: the opponent scores -1 after about 64 agent steps; its ball flickers between frames.
    env = AtariWrapper(gym.make(PONG), terminal_on_life_loss=False, clip_reward=False)
    obs, _ = env.reset(seed=1)
    raw, _, frame = hand_reset(PONG, seed=1, fire=False)
    for action in (FIRE, 2):  # FireReset's presses go through the frame skip: 4 frames each
        frame, *_ = hand_step(raw, action)
    np.testing.assert_array_equal(obs, warp(frame))
    pooled_differs, rewards = False, []
    for _ in range(80):
        obs, reward, terminated, truncated, _ = env.step(NOOP)
        frame, total, *ends = hand_step(raw, NOOP)
        np.testing.assert_array_equal(obs, warp(frame))
        assert reward == total and [terminated, truncated] == ends
        pooled_differs |= not np.array_equal(frame, raw.unwrapped.ale.getScreenRGB())
        rewards.append(reward)
    assert pooled_differs  # the max of two frames was not just the last one on some step
    assert -1.0 in rewards


def test_rewards_clipped_to_their_sign():
    # Space Invaders pays 5 to 30 points per invader shot: FIRE scores within 170 agent steps.
    clipped = AtariWrapper(gym.make("SpaceInvadersNoFrameskip-v4"))
    unclipped = AtariWrapper(gym.make("SpaceInvadersNoFrameskip-v4"), clip_reward=False)
    clipped.reset(seed=0)
    unclipped.reset(seed=0)
    raw_rewards = []
    for _ in range(170):
        reward = clipped.step(FIRE)[1]
        raw_rewards.append(unclipped.step(FIRE)[1])
        assert reward == np.sign(raw_rewards[-1]) and isinstance(reward, float)
    assert max(raw_rewards) > 1


def steps_to_life_lost(env):
    """NOOP steps until `env` says terminated (Breakout: the ball launched by FIRE falls past the paddle)."""
    for t in range(1, 200):
        *_, terminated, truncated, info = env.step(NOOP)
        if terminated or truncated:
            return t, info
    raise AssertionError("no life lost in 200 steps")


def test_episodic_life_ends_the_episode_but_not_the_game():
    episodic = AtariWrapper(gym.make(BREAKOUT), clip_reward=False)
    whole_game = AtariWrapper(gym.make(BREAKOUT), terminal_on_life_loss=False, clip_reward=False)
    episodic.reset(seed=3)
    whole_game.reset(seed=3)
    for lives in (4, 3, 2, 1):
        t, info = steps_to_life_lost(episodic)
        assert info["lives"] == lives and not episodic.unwrapped.ale.game_over()
        for _ in range(t):
            *_, terminated, _, _ = whole_game.step(NOOP)
            assert not terminated
        # The "reset" continues the game: a NOOP step, then FireReset's FIRE and 2, as the whole game does by hand.
        assert "episode" not in info  # a life, not a game: nothing reported
        obs, info = episodic.reset()  # the vector env's reset after an episode: no seed
        for action in (NOOP, FIRE, 2):
            expected, *_ = whole_game.step(action)
        np.testing.assert_array_equal(obs, expected)
        assert info["lives"] == lives and info["episode_frame_number"] > 100
    _, info = steps_to_life_lost(episodic)
    assert episodic.unwrapped.ale.game_over()
    # The game, reported as SB3's Monitor under the wrapper reports it: emulator frames since the reset, and the
    # raw score, which the same game played without episodic life reports too.
    assert info["episode"]["l"] == info["episode_frame_number"]
    while not (step := whole_game.step(NOOP))[2]:
        pass
    assert info["episode"] == step[4]["episode"] and info["episode"]["r"] > 0
    # Game over: both really reset, drawing the same NOOP count from the same np_random.
    obs, info = episodic.reset()
    np.testing.assert_array_equal(obs, whole_game.reset()[0])
    assert info["lives"] == 5 and info["episode_frame_number"] <= 30 + 8


def test_a_seeded_reset_starts_a_new_game_mid_game():
    """An evaluation's reset (seeded) must not carry on a game that the last evaluation left unfinished."""
    episodic = AtariWrapper(gym.make(BREAKOUT), clip_reward=False)
    fresh = AtariWrapper(gym.make(BREAKOUT), clip_reward=False)
    episodic.reset(seed=3)
    steps_to_life_lost(episodic)
    obs, info = episodic.reset(seed=4)
    np.testing.assert_array_equal(obs, fresh.reset(seed=4)[0])
    assert info["lives"] == 5


def test_the_game_score_is_the_raw_sum_over_every_life():
    """Pong's game, played by random actions to its end: the reported score is the sum of the unclipped rewards of
    every step the agent saw (Pong: -1 or +1 per point, so clipping changes nothing there: check the sum only)."""
    env = AtariWrapper(gym.make(PONG), clip_reward=False)
    env.reset(seed=0)
    env.action_space.seed(0)
    total = 0.0
    for _ in range(10_000):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        total += float(reward)
        if terminated or truncated:
            break
    assert info["episode"]["r"] == total and total <= -21 + 5  # Pong ends at 21 points: random play loses


def chain(env):
    while isinstance(env, gym.Wrapper):
        yield type(env)
        env = env.env


@pytest.mark.parametrize(("env_id", "fires"), [(BREAKOUT, True), (PONG, True), ("FreewayNoFrameskip-v4", False)])
def test_fire_reset_only_where_action_1_is_fire(env_id, fires):
    env = AtariWrapper(gym.make(env_id))
    meanings = env.unwrapped.get_action_meanings()
    assert (meanings[1] == "FIRE") is fires  # Pong has FIRE too: SB3 presses it there as well
    assert (FireReset in set(chain(env))) is fires


def test_no_fire_reset_is_the_noops_alone():
    env = AtariWrapper(gym.make("FreewayNoFrameskip-v4"), frame_skip=1)
    obs, _ = env.reset(seed=2)
    np.testing.assert_array_equal(obs, warp(hand_reset("FreewayNoFrameskip-v4", 2, fire=False)[2]))


def test_wrappers_in_sb3_order():
    env = AtariWrapper(gym.make(BREAKOUT), action_repeat_probability=0.25)
    names = [cls.__name__ for cls in chain(env)]
    sb3 = ["AtariWrapper", "ClipReward", "WarpFrame", "FireReset", "EpisodicLife", "MaxAndSkip", "NoopReset"]
    assert names[: len(sb3) + 2] == [*sb3, "StickyActions", "GameMonitor"]  # SB3's Monitor under it (RL Zoo's)


def test_sticky_actions_repeat_the_previous_action():
    # With probability 1 the action after a reset, NOOP, repeats forever: even FireReset's presses are NOOPs.
    sticky = AtariWrapper(gym.make(PONG), action_repeat_probability=1.0, noop_max=0, terminal_on_life_loss=False)
    obs, _ = sticky.reset(seed=0)
    raw = gym.make(PONG)
    raw.reset(seed=0)
    for _ in (FIRE, 2):
        frame, *_ = hand_step(raw, NOOP)
    np.testing.assert_array_equal(obs, warp(frame))
    for _ in range(20):
        np.testing.assert_array_equal(sticky.step(3)[0], warp(hand_step(raw, NOOP)[0]))


def test_an_env_skipping_frames_itself_is_refused():
    with pytest.raises(ValueError, match=r"ALE/Breakout-v5.*frameskip=4.*NoFrameskip") as error:
        AtariWrapper(gym.make("ALE/Breakout-v5"))
    assert isinstance(error.value, ConfigError)
    AtariWrapper(gym.make("ALE/Breakout-v5", frameskip=1))
    with pytest.raises(ConfigError, match="ALE env"):
        AtariWrapper(gym.make("CartPole-v1"))


def test_sb3_name_resolves_to_rlbench_copy_and_builds_a_flat_env():
    (wrapper,) = parse_env_wrappers([{SB3_NAME: {"terminal_on_life_loss": False}}], trusted_modules())
    assert wrapper.wrapper_class is AtariWrapper and wrapper.to_entry() == {SB3_NAME: {"terminal_on_life_loss": False}}
    assert "stable_baselines3" not in sys.modules
    env = make_single_env(BREAKOUT, {}, parse_env_wrappers([SB3_NAME], trusted_modules()))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84 * 84,) and obs.dtype == np.uint8
    assert env.step(np.array([1.0], np.float32))[0].shape == (84 * 84,)  # action index 1: FIRE


def test_atari_ids():
    for env_id in (BREAKOUT, "ALE/Pong-v5", "Breakout-v4", "PongNoFrameskip-v0"):
        register_atari_envs(env_id)
        assert is_atari(env_id), env_id
    assert not is_atari("Pendulum-v1") and not is_atari("tests.envs:Counting-v0")
    assert looks_atari("ALE/Pong-v5") and looks_atari(PONG) and not looks_atari("Breakout-v4")


def test_without_the_extra_a_config_error_names_it(monkeypatch):
    breakout = gym.make(BREAKOUT)  # before ale_py is hidden: gym.make imports ale_py.env
    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if not installed: its import raises ImportError
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[atari\]"'):
        register_atari_envs("ALE/Pong-v5")
    assert is_atari(BREAKOUT) and not is_atari("Breakout-v4")  # the id's pattern alone
    register_atari_envs("Pendulum-v1")  # not Atari: nothing to import
    monkeypatch.setitem(sys.modules, "cv2", None)
    with pytest.raises(ConfigError, match=r"\.\[atari\]"):
        AtariWrapper(breakout)


def test_rlbench_imports_without_ale_py_or_cv2():
    code = (
        "import sys, rlbench.envs.atari, rlbench.envs.make, rlbench.envs.wrappers; "
        "assert not {'ale_py', 'cv2'} & set(sys.modules), sorted({'ale_py', 'cv2'} & set(sys.modules))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_game_with_lives_lost_is_rebuilt_on_resume_from_its_start():
    """A checkpoint mid-game after lives lost (the agent's episode began at the last one, but the game did not):
    the record goes back to the game's start, with where the resets that carried it on were made, and a fresh env
    replays it to the same frame; then both play on alike, to the same game reported at its end. The second game
    begins with an autoreset from the env's RNG (no seed) and is rebuilt from that RNG state."""
    wrappers = parse_env_wrappers([SB3_NAME], trusted_modules())
    first = make_vector_env(BREAKOUT, 1, "dummy", {}, wrappers, record_episodes=True)
    first.reset(seed=3)
    rng = np.random.default_rng(0)
    actions = lambda: rng.integers(0, 4, (1, 1)).astype(np.float32)  # noqa: E731

    def play_until(env, games, lives_lost):
        while True:
            obs, _, terminated, _, info = env.step(actions())
            game_over = reported_episodes(info, 1).ended[0]
            lives_lost -= int(terminated[0] and not game_over and games <= 0)
            games -= int(game_over)
            if games <= 0 and lives_lost <= 0:
                return obs

    for games, lives_lost in ((0, 2), (1, 2)):  # mid first game, then mid second game
        saved_obs = play_until(first, games, lives_lost)
        (record,) = episode_records(first)
        assert len(record.start["resets"]) == 2 and ("seed" in record.start) == (games == 0)
        second = make_vector_env(BREAKOUT, 1, "dummy", {}, wrappers, record_episodes=True)
        second.reset(seed=9)
        obs, restored = restore_episodes(second, [record], saved_obs)
        assert restored.tolist() == [True] and np.array_equal(obs, saved_obs)
        for _ in range(3000):  # on to the game's end
            action = actions()
            ours, theirs = second.step(action), first.step(action)
            for got, want in zip(ours[:4], theirs[:4], strict=True):
                np.testing.assert_array_equal(got, want)
            game = reported_episodes(theirs[4], 1)
            if game.ended[0]:  # the game's raw score and frames, every life
                for got, want in zip(reported_episodes(ours[4], 1), game, strict=True):
                    np.testing.assert_array_equal(got, want)
                assert game.returns[0] > 0
                break
        else:
            raise AssertionError("the game did not end in 3000 steps")
