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
from tests.variants import slow_variant

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


def test_simba_policy_trains_and_plays(tmp_path, capsys):
    """`-params policy:SimbaPolicy` through train.py: config.yml names it, and enjoy.py rebuilds the SimBa
    networks from the checkpoint (an MLP would not fit the saved parameters)."""
    argv = ["-f", str(tmp_path), "--algo", "sac", "--env", "Pendulum-v1", "-n", "100", "--verbose", "0"]
    simba = ["-params", "policy:SimbaPolicy", "policy_kwargs:dict(net_arch=[8])", "learning_starts:50", "batch_size:8"]
    assert train([*argv, "--eval-freq", "-1", *simba]) == 0
    config = (tmp_path / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "config.yml").read_text()
    assert "policy: SimbaPolicy" in config and "weight_decay: 0.0001" in config
    code, out, _ = play(tmp_path, capsys, "-n", "200")
    assert code == 0 and "1 Episodes\nMean reward: " in out


def test_deterministic_replay_repeats_and_stochastic_differs(logs, capsys):
    def returns(*argv):
        _, out, _ = play(logs, capsys, "-n", "200", *argv)
        return out.split("Mean reward: ")[1]

    assert returns() == returns()
    assert returns("--stochastic", "--seed", "0") != returns("--stochastic", "--seed", "0", "--n-envs", "2")


def test_a_td3_model_plays_and_its_stochastic_action_is_its_deterministic_one(tmp_path, capsys):
    """TD3's actor is deterministic (its exploration noise is the training loop's): --stochastic plays the same."""
    argv = ["-f", str(tmp_path), "--algo", "td3", "--env", "Pendulum-v1", "-n", "200", "--eval-freq", "0"]
    argv += ["--verbose", "0", *TINY, "noise_type:'normal'", "noise_std:0.3"]
    assert train(argv) == 0

    def returns(*extra):
        play = ["--algo", "td3", "--env", "Pendulum-v1", "-f", str(tmp_path), "--no-render", "-n", "200", *extra]
        assert enjoy(play) == 0
        out = capsys.readouterr().out
        assert f"Loaded {tmp_path / 'td3' / 'Pendulum-v1_1' / 'Pendulum-v1.zip'} (td3, 200 env steps)" in out
        return out.split("Mean reward: ")[1]

    assert returns("--seed", "3") == returns("--stochastic", "--seed", "3")


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


@pytest.mark.parametrize("env_id", [slow_variant("HalfCheetah-v4"), "HalfCheetahBulletEnv-v0"])
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


# -- issue 32: forged checkpoints and configs, other libraries' models, env kwargs and ids ----------------


def replace_manifest(path, edit=None, text=None):
    """Rewrite `path`'s manifest.json in place: edited (a dict -> None), or replaced by `text`."""
    import json
    import zipfile

    with zipfile.ZipFile(path) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    manifest = json.loads(members.pop("manifest.json"))
    if edit is not None:
        edit(manifest)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", json.dumps(manifest) if text is None else text)


def test_deeply_nested_manifest_is_one_line_and_the_last_checkpoint_falls_back(logs, capsys, tmp_path):
    """Item 1: a RecursionError traceback, and --load-last-checkpoint crashed instead of falling back."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    run_dir = copy / "sac" / "Pendulum-v1_1"
    for name in ("Pendulum-v1.zip", "rl_model_300_steps.zip"):
        replace_manifest(run_dir / name, text="[" * 5000 + "]" * 5000)
    code, _, err = play(copy, capsys, "-n", "10")
    assert code == 1
    assert err == (
        f"error: corrupt or incomplete checkpoint: {run_dir / 'Pendulum-v1.zip'} (unreadable manifest: nested too "
        f"deeply to parse); newest valid checkpoint: {run_dir / 'rl_model_200_steps.zip'}\n"
    )
    code, out, err = play(copy, capsys, "-n", "10", "--load-last-checkpoint")
    assert code == 0, err
    assert f"skipping {run_dir / 'rl_model_300_steps.zip'}: corrupt or incomplete" in err
    assert f"Loaded {run_dir / 'rl_model_200_steps.zip'}" in out


def test_device_gpu_n_picks_a_gpu_and_without_one_is_one_line(logs, capsys):
    """Issue 32 item 14: enjoy.py took auto/cpu/gpu/cuda only; gpu:N / cuda:N now pick the N-th GPU, as in
    train.py. On a CPU-only machine it is the missing-GPU line, naming the devices found."""
    import jax

    if jax.default_backend() != "cpu":
        pytest.skip("a GPU is present")
    code, out, err = play(logs, capsys, "-n", "10", "--device", "cuda:1")
    assert code == 2 and out == "" and re.fullmatch(r"error: --device cuda:1: no GPU found \(devices: .*cpu.*\n", err)


@pytest.mark.parametrize(
    "edit,reason",
    [
        (
            lambda manifest: manifest["spaces"]["observation"].update(shape=[2**40, 2**40]),
            f"manifest spaces.observation: shape [1099511627776, 1099511627776] describes {2**80} values, but its "
            "low and high list 3 and 3",
        ),
        (
            # No per-env list of episode starts to betray the count (the manifest's own check would refuse it).
            lambda manifest: manifest.update(n_envs=10**8, host={**manifest["host"], "episode_starts": None}),
            r"the manifest makes host/obs.npy [100000000, 3]: 300000000 values, more than the whole file",
        ),
        (
            lambda manifest: manifest["hyperparams"]["policy_kwargs"].update(net_arch=[4096, 4096]),
            "state.msgpack holds",
        ),
    ],
    ids=["obs shape overflowing int64", "n_envs", "net_arch"],
)
def test_forged_sizes_are_refused_before_the_policy_is_built(logs, capsys, tmp_path, edit, reason):
    """Item 2: np.prod overflowed to 0 (a ZeroDivisionError traceback); a manifest's n_envs and net_arch sized
    gSDE's matrices and the networks before the saved state was compared with them."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    model = copy / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip"
    replace_manifest(model, edit)
    code, _, err = play(copy, capsys, "-n", "10")
    assert code == 1, err
    assert err.startswith(f"error: corrupt or incomplete checkpoint: {model} ({reason}") and err.count("\n") == 1, err


def test_an_sb3_model_is_named_as_one(capsys, tmp_path):
    """Item 14: an RL Zoo model was called a corrupt or incomplete checkpoint."""
    from tests.integration.test_checkpoint_untrusted import sb3_model

    run_dir = tmp_path / "sac" / "Pendulum-v1_1"
    run_dir.mkdir(parents=True)
    model = sb3_model(run_dir / "Pendulum-v1.zip")
    code, _, err = play(tmp_path, capsys)
    assert code == 2
    assert err.startswith(f"error: {model} is a Stable-Baselines3 / RL Zoo model") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--env-kwargs", "bogus:1"],
            "Pendulum-v1 fails with bogus=1: TypeError: PendulumEnv.__init__() got an unexpected keyword argument",
        ),
        (["--env-kwargs", "g:[1,2]"], "Pendulum-v1 fails with g=[1, 2]: TypeError: unsupported operand"),
    ],
)
def test_env_kwargs_are_probed_before_playing(logs, capsys, argv, message):
    """Item 12: a TypeError traceback from the env, where train.py probes the kwargs up front."""
    code, out, err = play(logs, capsys, *argv)
    config = logs / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "config.yml"
    assert code == 2 and "Loaded" not in out
    assert err.startswith(f"error: --env-kwargs / env_kwargs in {config}: {message}") and err.count("\n") == 1, err


LAUGHS = "a: &a [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n" + "".join(
    f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    "text,message",
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply to parse"),
        ("env_kwargs: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nested"),
        (LAUGHS + "env_kwargs: {g: *i}\n", "holds more than 200000 values (YAML aliases counted as expanded)"),
    ],
    ids=["nested lists", "nested maps", "billion laughs"],
)
def test_saved_config_nested_or_alias_bombed_is_one_line(logs, capsys, tmp_path, text, message):
    """Item 12: a RecursionError traceback; an alias-expanded env_kwargs reached the env's step."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    config = copy / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "config.yml"
    config.write_text(text)
    code, out, err = play(copy, capsys, "-n", "10")
    assert code == 2 and "Loaded" not in out
    assert err.startswith(f"error: cannot read hyperparameters from {config}: ") and message in err, err
    assert err.count("\n") == 1, err


def test_saved_env_kwargs_the_env_rejects_are_probed(logs, capsys, tmp_path):
    """Item 12: config.yml's env_kwargs are checked as train.py checks its input, not at the env's first step."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    config = copy / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "config.yml"
    config.write_text(config.read_text().replace("env_kwargs: {}", "env_kwargs: {g: [[1, 2], [3, 4]]}"))
    code, _, err = play(copy, capsys, "-n", "10")
    assert code == 2
    assert err.startswith(f"error: env_kwargs in {config}: Pendulum-v1 fails with g=[[1, 2], [3, 4]]: "), err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("env_id", ["..:Pendulum-v1", ":Pendulum-v1", ".os:Pendulum-v1"])
def test_env_id_with_a_malformed_module_is_one_line(logs, capsys, env_id):
    """Item 12: importlib's TypeError / ValueError tracebacks."""
    code = enjoy(["--algo", "sac", "--env", env_id, "-f", str(logs), "--no-render"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: environment {env_id!r}: ") and "is not a module name" in err, err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "env_id,extra",
    [("CartPole-v1", []), ("Pendulum-v1", ["use_sde:False"])],
    ids=["discrete", "box"],
)
def test_a_ppo_model_plays_its_mode_and_a_sampled_policy(tmp_path, capsys, env_id, extra):
    """PPO on a Discrete (CartPole: Categorical, argmax) and a Box env (Pendulum: Gaussian mean, clipped):
    enjoy.py rebuilds the actor-critic from the checkpoint; deterministic play repeats, --stochastic samples."""
    argv = ["-f", str(tmp_path), "--algo", "ppo", "--env", env_id, "-n", "256", "--eval-freq", "-1"]
    tiny = ["-params", "n_envs:2", "n_steps:64", "batch_size:32", "n_epochs:2", "policy_kwargs:dict(net_arch=[16])"]
    assert train([*argv, "--verbose", "0", *tiny, *extra]) == 0

    def returns(*more):
        play = ["--algo", "ppo", "--env", env_id, "-f", str(tmp_path), "--no-render", "-n", "300", *more]
        assert enjoy(play) == 0
        out = capsys.readouterr().out
        assert "(ppo, 256 env steps)" in out
        return out.split("Mean reward: ")[1]

    assert returns("--seed", "1") == returns("--seed", "1")
    sampled = [returns("--stochastic", "--seed", str(seed)) for seed in (1, 2)]
    assert sampled[0] != sampled[1]
