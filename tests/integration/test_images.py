"""Image observations through train.py and enjoy.py: CnnPolicy for DQN and PPO on a small image env (tests.envs'
BrightSide-v0), a bit-exact resume with the pixels in the replay buffer, the refusals of what cannot read images,
and Atari through ale-py with RL Zoo's `atari` entry, whose Monitor files and evaluations count games."""

import csv
import re

import numpy as np
import pytest

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main
from rlbench.store.checkpoint import read_checkpoint
from tests.integration.test_device_loop import state_hash

ENV = "tests.envs:BrightSide-v0"
FOLDER = "tests.envs_BrightSide-v0"
DQN_CNN = [
    "--algo", "dqn", "--env", ENV, "--seed", "2", "--verbose", "0", "-params", "policy:CnnPolicy",
    "learning_starts:64", "buffer_size:1000", "batch_size:16", "train_freq:4", "gradient_steps:2",
    "target_update_interval:40", "exploration_fraction:0.3",
    "policy_kwargs:dict(features_extractor_kwargs=dict(features_dim=32))",
]  # fmt: skip


def test_a_cnn_policy_checkpoint_mid_run_resumes_bit_identically_with_its_pixels(tmp_path):
    """DQN with NatureCNN: the checkpoint at 250 env steps holds the replay buffer's pixels as uint8 and the
    image's shape; -i from it ends where the run that never stopped ends."""
    argv = [*DQN_CNN, "-n", "500", "--eval-freq", "250", "--eval-episodes", "2", "-f", str(tmp_path)]
    assert main([*argv, "--save-freq", "250", "--save-replay-buffer"]) == 0
    first = tmp_path / "dqn" / f"{FOLDER}_1"
    checkpoint = read_checkpoint(first / "rl_model_250_steps.zip")
    assert checkpoint.manifest.run.spaces.observation.shape == (36, 36, 1)
    pixels = checkpoint.group("replay_buffer")["pixels"]
    assert pixels.dtype == np.uint8 and pixels.shape == (248, 2 * 36 * 36)  # inserted every train_freq 4 steps
    host = checkpoint.group("host")  # the 2 steps since wait on the host, as uint8 too
    assert host["obs"].dtype == host["pending_obs"].dtype == np.uint8 and host["pending_obs"].shape == (2, 1296)
    resume = ["--algo", "dqn", "--env", ENV, "-i", str(first / "rl_model_250_steps.zip"), "-f", str(tmp_path)]
    assert main([*resume, "--eval-freq", "250", "--eval-episodes", "2", "--verbose", "0"]) == 0
    second = tmp_path / "dqn" / f"{FOLDER}_2"
    assert state_hash(first / f"{FOLDER}.zip") == state_hash(second / f"{FOLDER}.zip")
    original, continued = np.load(first / "evaluations.npz"), np.load(second / "evaluations.npz")
    np.testing.assert_array_equal(continued["results"], original["results"])


def test_ppo_with_a_cnn_policy_trains_and_enjoy_plays_it(tmp_path):
    argv = ["--algo", "ppo", "--env", ENV, "-n", "256", "--eval-freq", "-1", "-f", str(tmp_path), "--verbose", "0"]
    params = ["-params", "policy:CnnPolicy", "n_envs:2", "n_steps:64", "batch_size:32", "n_epochs:2"]
    assert main([*argv, *params]) == 0
    play = ["--algo", "ppo", "--env", ENV, "-f", str(tmp_path), "--no-render", "-n", "40"]
    assert enjoy(play) == 0


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--algo", "dqn", "--env", "CartPole-v1", "-params", "policy:CnnPolicy"],
         r"policy: CnnPolicy reads images \(uint8 \[height, width, channels\] in \[0, 255\]\); the env observes "
         r"a flat vector of 4 values: use MlpPolicy$"),
        (["--algo", "ppo", "--env", ENV, "--env-kwargs", "side:30", "-params", "policy:CnnPolicy"],
         r"policy: CnnPolicy's NatureCNN needs images of at least 36 x 36 pixels .* the env's are \[30, 30, 1\]$"),
        (["--algo", "sac", "--env", ENV, "--env-kwargs", "box_actions:True"],
         r"--env tests.envs:BrightSide-v0 observes images \(uint8 \[36, 36, 1\]\), and --algo sac reads flat "
         r"vector observations only; algorithms for images: ppo, a2c, dqn, qrdqn$"),
        (["--algo", "dqn", "--env", ENV, "-params", "normalize:True"],
         r"normalize: --env tests.envs:BrightSide-v0 observes images \(uint8 \[36, 36, 1\]\), which the "
         r"networks scale by 255"),
        (["--algo", "dqn", "--env", ENV, "-params", "frame_stack:1000", "buffer_size:100000"],
         r"replay buffer needs [\d.]+ GiB \(100,000 x 2592012 B, 2 x uint8 \[36, 36, 1000\] observations each\) but "
         r"only [\d.]+ GiB is available; lower buffer_size"),
    ],
)  # fmt: skip
def test_what_cannot_read_the_observations_is_refused_in_one_line(tmp_path, capsys, argv, message):
    assert main([*argv, "-n", "100", "-f", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.match(f"error: {message}", err), err
    assert not any(tmp_path.iterdir())


def test_atari_takes_rl_zoos_atari_entry_and_counts_games_in_the_monitor_file_and_evaluations(tmp_path, capsys):
    """BreakoutNoFrameskip-v4 with dqn.yml's `atari` entry (SB3's AtariWrapper, resolved to rlbench's, frame_stack
    4, CnnPolicy), acting only (learning starts later): the agent's episodes are lives, the Monitor file's rows and
    the evaluation's episodes are games, at their raw score and length in emulator frames, as RL Zoo's are."""
    pytest.importorskip("ale_py")
    argv = ["--algo", "dqn", "--env", "BreakoutNoFrameskip-v4", "-n", "800", "--eval-freq", "800"]
    argv += ["--eval-episodes", "1", "-f", str(tmp_path), "--seed", "1", "-params", "learning_starts:5000"]
    assert main([*argv, "buffer_size:1000"]) == 0
    assert "Using the 'atari' entry of" in capsys.readouterr().out
    run = tmp_path / "dqn" / "BreakoutNoFrameskip-v4_1"
    checkpoint = read_checkpoint(run / "BreakoutNoFrameskip-v4.zip")
    assert checkpoint.manifest.run.spaces.observation.shape == (84, 84, 4)  # frames stacked on the channel axis
    with (run / "0.monitor.csv").open() as file:
        games = list(csv.DictReader(line for line in file if not line.startswith("#")))
    lengths = [int(game["l"]) for game in games]
    # Random play loses Breakout's 5 lives within a few hundred agent steps (4 frames each): a few games, each
    # longer than 4 frames x 5 lives x the ~20 agent steps a life takes at least.
    assert 1 <= len(games) <= 800 * 4 // 400 and all(length > 400 for length in lengths), lengths
    assert sum(lengths) <= 800 * 4 + 30 * len(games)  # frames: 4 per agent step, and each game's no-ops
    evaluation = np.load(run / "evaluations.npz")
    assert evaluation["ep_lengths"][0][0] > 400  # one game, in frames
    # enjoy.py counts games too: each printed episode a game, in frames.
    capsys.readouterr()
    play = ["--algo", "dqn", "--env", "BreakoutNoFrameskip-v4", "-f", str(tmp_path), "--no-render", "-n", "400"]
    assert enjoy(play) == 0
    printed = [int(line.rsplit("length ", 1)[1]) for line in capsys.readouterr().out.splitlines() if "length " in line]
    assert printed and all(length > 400 for length in printed), printed


def test_an_atari_run_resumed_mid_game_after_lives_lost_plays_the_same_games(tmp_path, capsys):
    """A checkpoint mid-game, lives lost since the game began (the agent's episode began at the last one): the
    resume replays the game from its start with its resets, so every env is restored (nothing printed about new
    episodes) and the games in the Monitor file are those of the run that was not stopped."""
    pytest.importorskip("ale_py")
    argv = ["--algo", "dqn", "--env", "BreakoutNoFrameskip-v4", "--eval-freq", "-1", "--seed", "1", "--verbose", "0"]
    params = ["-params", "learning_starts:5000", "buffer_size:1000"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert main([*argv, "-n", "600", "-f", str(whole), "--save-freq", "300", *params]) == 0
    checkpoint = whole / "dqn" / "BreakoutNoFrameskip-v4_1" / "rl_model_300_steps.zip"
    (start,) = read_checkpoint(checkpoint).manifest.host.episode_starts
    assert len(start["resets"]) >= 1  # lives lost in the game the checkpoint is in
    capsys.readouterr()
    assert main([*argv, "-n", "300", "-f", str(stopped), "-i", str(checkpoint), *params]) == 0  # 300 more
    assert "could not be restored" not in capsys.readouterr().out

    def games(folder):
        with (folder / "dqn" / "BreakoutNoFrameskip-v4_1" / "0.monitor.csv").open() as file:
            return [(row["r"], row["l"]) for row in csv.DictReader(line for line in file if not line.startswith("#"))]

    assert len(games(whole)) >= 2 and games(stopped) == games(whole)
