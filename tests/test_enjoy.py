"""enjoy.py: each way of choosing the model, the saved config's safety (A5), and headless mp4 recording."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train
from tests.conftest import REPO_ROOT

TINY = ["-params", "policy_kwargs:dict(net_arch=[16])", "learning_starts:50", "batch_size:32"]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs")
    assert train(["-f", str(folder), "--algo", "sac", "--env", "Pendulum-v1", "-n", "300", "--eval-freq", "100",
                  "--eval-episodes", "1", "--save-freq", "100", "--verbose", "0", *TINY]) == 0
    return folder


def play(logs, capsys, *argv):
    code = enjoy(["--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), "--no-render", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv,loaded", [
    ([], "Pendulum-v1.zip"),
    (["--exp-id", "1"], "Pendulum-v1.zip"),
    (["--load-best"], "best_model.zip"),
    (["--load-checkpoint", "200"], "rl_model_200_steps.zip"),
    (["--load-last-checkpoint"], "rl_model_300_steps.zip"),
])
def test_each_load_option_plays_episodes_and_prints_the_mean(logs, capsys, argv, loaded):
    code, out, _ = play(logs, capsys, "-n", "400", *argv)
    assert code == 0
    assert f"Loaded {logs / 'sac' / 'Pendulum-v1_1' / loaded}" in out
    assert out.count("(env 0): return") == 2 and "length 200" in out
    assert "2 Episodes\nMean reward: " in out


def test_deterministic_replay_repeats_and_stochastic_differs(logs, capsys):
    def returns(*argv):
        _, out, _ = play(logs, capsys, "-n", "200", *argv)
        return out.split("Mean reward: ")[1]

    assert returns() == returns()
    assert returns("--stochastic", "--seed", "0") != returns("--stochastic", "--seed", "0", "--n-envs", "2")


def test_last_checkpoint_skips_a_torn_newest_one_with_a_warning(logs, capsys, tmp_path):
    """B11: the newest checkpoint is torn: the previous valid one is loaded and the skip is named."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    newest = copy / "sac" / "Pendulum-v1_1" / "rl_model_300_steps.zip"
    newest.write_bytes(newest.read_bytes()[:1000])
    code, out, err = play(copy, capsys, "-n", "10", "--load-last-checkpoint")
    assert code == 0
    assert f"skipping {newest}: corrupt or incomplete" in err
    assert "Loaded " + str(copy / "sac" / "Pendulum-v1_1" / "rl_model_200_steps.zip") in out
    code, _, err = play(copy, capsys, "-n", "10", "--load-checkpoint", "300")
    assert code == 1 and f"corrupt or incomplete checkpoint: {newest}" in err
    assert "newest valid checkpoint: " in err and "rl_model_200_steps.zip" in err


def test_missing_model_or_run_exits_2_listing_what_exists(logs, capsys):
    code, _, err = play(logs, capsys, "--load-checkpoint", "150")
    assert code == 2 and "no model at" in err and "rl_model_100_steps.zip" in err and "best_model.zip" in err
    code, _, err = play(logs, capsys, "--exp-id", "7")
    assert code == 2 and "run folder not found" in err
    code = enjoy(["--algo", "crossq", "--env", "Pendulum-v1", "-f", str(logs), "--no-render"])
    assert code == 2 and "no run of crossq" in capsys.readouterr().err


@pytest.mark.parametrize("payload,message", [
    ("policy_kwargs: \"__import__('os').system('touch {marker}')\"\n", "policy_kwargs"),
    ("env_kwargs: !!python/object/apply:os.system ['touch {marker}']\n", "invalid YAML"),
])
def test_saved_config_with_code_is_refused(logs, capsys, tmp_path, payload, message):
    """A5: code in a saved config.yml is never run: exit 2, and the marker file is not created."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    marker = tmp_path / "pwned"
    config = copy / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "config.yml"
    config.write_text(config.read_text() + payload.format(marker=marker))
    code, _, err = play(copy, capsys)
    assert code == 2 and message in err and str(config) in err
    assert not marker.exists()


@pytest.mark.parametrize("env_id", ["HalfCheetah-v4", "HalfCheetahBulletEnv-v0"])
def test_headless_recording_writes_one_frame_per_step(tmp_path, env_id):
    """MuJoCo (EGL) and PyBullet (its CPU renderer), with no display: an mp4 of exactly -n frames."""
    import imageio.v3 as iio

    assert train(["-f", str(tmp_path), "--algo", "sac", "--env", env_id, "-n", "20", "--eval-freq", "-1",
                  "--verbose", "0", "-params", "policy_kwargs:dict(net_arch=[8])", "learning_starts:1000"]) == 0
    video = tmp_path / "videos" / "agent.mp4"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    proc = subprocess.run([sys.executable, "scripts/record_video.py", "--algo", "sac", "--env", env_id,
                           "-f", str(tmp_path), "-n", "25", "-o", str(video)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frames = iio.imread(video)
    assert frames.shape[0] == 25 and frames.ndim == 4 and frames.shape[-1] == 3
    assert np.asarray(frames).std() > 1.0  # an image, not a blank frame
    assert f"Recorded 25 frames to {video}" in proc.stdout
    assert Path(video).stat().st_size > 1000
