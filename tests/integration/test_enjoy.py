"""enjoy.py: each way of choosing the model, the saved config's safety (A5), and headless mp4 recording."""

import ctypes.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlbench.cli.enjoy import build_parser, video_path
from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train
from tests.conftest import REPO_ROOT

TINY = ["-params", "policy_kwargs:dict(net_arch=[16])", "learning_starts:50", "batch_size:32"]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs")
    assert (
        train(
            [
                "-f",
                str(folder),
                "--algo",
                "sac",
                "--env",
                "Pendulum-v1",
                "-n",
                "300",
                "--eval-freq",
                "100",
                "--eval-episodes",
                "1",
                "--save-freq",
                "100",
                "--verbose",
                "0",
                *TINY,
            ]
        )
        == 0
    )
    return folder


def read_video(path):
    """Frames [n, H, W, 3], decoded by the video extra's ffmpeg. (imageio's reader would start ffmpeg with a
    fork, and JAX, running in this process, would warn.)"""
    import imageio_ffmpeg

    done = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True,
        check=True,
    )
    width, height = map(int, re.search(rb"Video: .*?, (\d+)x(\d+)[, ]", done.stderr).groups())
    return np.frombuffer(done.stdout, np.uint8).reshape(-1, height, width, 3)


def play(logs, capsys, *argv):
    code = enjoy(["--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), "--no-render", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "argv,loaded",
    [
        ([], "Pendulum-v1.zip"),
        (["--exp-id", "1"], "Pendulum-v1.zip"),
        (["--load-best"], "best_model.zip"),
        (["--load-checkpoint", "200"], "rl_model_200_steps.zip"),
        (["--load-last-checkpoint"], "rl_model_300_steps.zip"),
    ],
)
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


@pytest.mark.parametrize(
    "payload,message",
    [
        ("policy_kwargs: \"__import__('os').system('touch {marker}')\"\n", "policy_kwargs"),
        ("env_kwargs: !!python/object/apply:os.system ['touch {marker}']\n", "invalid YAML"),
    ],
)
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


def require_egl() -> None:
    """MuJoCo renders headless through Mesa's EGL, a system package: skipped on a developer machine without
    it (with the install line), a failure in CI, whose .ci/run installs it."""
    if ctypes.util.find_library("EGL") is None:
        message = "MuJoCo's headless rendering needs EGL: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.parametrize("env_id", ["HalfCheetah-v4", "HalfCheetahBulletEnv-v0"])
def test_headless_recording_writes_one_frame_per_step(tmp_path, env_id):
    """MuJoCo (EGL) and PyBullet (its CPU renderer), with no display: an mp4 of exactly -n frames."""
    if env_id.endswith("-v4"):
        require_egl()
    assert (
        train(
            [
                "-f",
                str(tmp_path),
                "--algo",
                "sac",
                "--env",
                env_id,
                "-n",
                "20",
                "--eval-freq",
                "-1",
                "--verbose",
                "0",
                "-params",
                "policy_kwargs:dict(net_arch=[8])",
                "learning_starts:1000",
            ]
        )
        == 0
    )
    video = tmp_path / "videos" / "agent.mp4"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    proc = subprocess.run(
        [
            sys.executable,
            "scripts/record_video.py",
            "--algo",
            "sac",
            "--env",
            env_id,
            "-f",
            str(tmp_path),
            "-n",
            "25",
            "-o",
            str(video),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    frames = read_video(video)
    assert frames.shape[0] == 25 and frames.ndim == 4 and frames.shape[-1] == 3
    assert np.asarray(frames).std() > 1.0  # an image, not a blank frame
    assert f"Recorded 25 frames to {video}" in proc.stdout
    assert Path(video).stat().st_size > 1000


def run_script(*argv, env=None):
    return subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)


def test_record_video_names_the_file_as_rl_zoo_in_its_output_folder(logs, tmp_path):
    """RL Zoo's -o/--output-folder is a folder (default <run folder>/videos) and the file is named after the
    model loaded; the old meaning, -o FILE.mp4, still works. Recording prints nothing on stderr: no fork
    warning from JAX (item 17: imageio-ffmpeg forked after JAX had started its threads)."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    run = copy / "sac" / "Pendulum-v1_1"
    base = ["scripts/record_video.py", "--algo", "sac", "--env", "Pendulum-v1", "-f", str(copy), "-n", "12"]
    headless = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")}
    done = run_script("-X", "dev", *base, env=headless)  # dev mode shows every warning
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # neither JAX's fork warning nor SDL's "XDG_RUNTIME_DIR is invalid"
    default = run / "videos" / "final-model-sac-Pendulum-v1-step-0-to-step-12.mp4"
    assert f"Recorded 12 frames to {default}" in done.stdout
    assert read_video(default).shape == (12, 500, 500, 3)
    done = run_script(*base, "--output-folder", str(tmp_path / "videos"), "--load-checkpoint", "200")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "videos" / "checkpoint-200-sac-Pendulum-v1-step-0-to-step-12.mp4").is_file()
    parser = build_parser(record_video=True)
    for flags, model, name in [
        (["--load-best"], "best_model.zip", "best-model"),
        (["--load-last-checkpoint"], "rl_model_300_steps.zip", "checkpoint-300"),
    ]:
        args = parser.parse_args(["--algo", "sac", "--env", "Pendulum-v1", "-n", "12", "-o", "v", *flags])
        assert video_path(args, run / model) == Path("v", f"{name}-sac-Pendulum-v1-step-0-to-step-12.mp4")
    done = run_script(*base, "-o", str(tmp_path / "one.gif"))
    assert done.returncode == 0 and read_video(tmp_path / "one.gif").shape[0] == 12
    assert not list(tmp_path.rglob("*.tmp"))  # ffmpeg wrote to temporaries, renamed when complete


def test_record_video_has_its_own_usage():
    done = run_script("scripts/record_video.py", "-h")
    assert done.returncode == 0 and done.stdout.startswith("usage: record_video.py")
    assert "-o FOLDER, --output-folder FOLDER" in done.stdout and "--record" not in done.stdout


def test_recording_without_the_video_extra_exits_2_before_any_work(logs, tmp_path):
    """imageio-ffmpeg not installed (a stub that fails to import, first on PYTHONPATH): exit 2 naming the
    install command, before the model is loaded or any folder is created."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "imageio_ffmpeg.py").write_text("raise ImportError(\"No module named 'imageio_ffmpeg'\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stubs), REPO_ROOT])}
    video = tmp_path / "videos" / "agent.mp4"
    for script in (["enjoy.py", "--record", str(video)], ["scripts/record_video.py", "-o", str(video.parent)]):
        done = run_script(*script, "--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), "-n", "5", env=env)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == (
            "error: recording needs the video extra (No module named 'imageio_ffmpeg'): "
            'pip install -e ".[video]" (or pip install imageio-ffmpeg pygame)\n'
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stubs"]
    assert not (logs / "sac" / "Pendulum-v1_1" / "videos").exists()


def test_reward_log_writes_an_sb3_monitor_file_per_env(logs, capsys, tmp_path):
    import json

    code, out, _ = play(logs, capsys, "-n", "400", "--n-envs", "2", "--reward-log", str(tmp_path / "rewards"))
    assert code == 0
    # "Episode 1 (env 0): return -1234.56, length 200" -> (0, "-1234.56")
    printed = {
        (int(line.split("(env ")[1][0]), line.split("return ")[1].split(",")[0])
        for line in out.splitlines()
        if "): return " in line
    }
    logged = set()
    for index in (0, 1):
        lines = (tmp_path / "rewards" / f"{index}.monitor.csv").read_text().splitlines()
        header = json.loads(lines[0].removeprefix("#"))
        assert lines[0].startswith("#") and header["env_id"] == "Pendulum-v1" and header["t_start"] > 0
        assert lines[1] == "r,l,t" and len(lines) == 4  # two 200-step episodes per env in 400 steps
        for row in lines[2:]:
            r, length, t = row.split(",")
            assert length == "200" and float(t) >= 0
            logged.add((index, f"{float(r):.2f}"))
    assert logged == printed and len(logged) == 4


def test_rl_zoo_flags_num_threads_and_custom_objects(logs, capsys, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")
    code, _, err = play(logs, capsys, "-n", "5", "--num-threads", "1", "--custom-objects")
    assert code == 0 and "--custom-objects: not needed (a checkpoint holds arrays and a manifest" in err
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false"  # as train.py --num-threads 1
    with pytest.raises(SystemExit) as exit_info:
        play(logs, capsys, "--num-threads", "4")
    assert exit_info.value.code == 2
    assert "--num-threads: invalid choice: 4 (choose from -1, 1)" in capsys.readouterr().err
