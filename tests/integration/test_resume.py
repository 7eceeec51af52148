"""Resuming (-i): bit-exact continuation across processes (I6), SIGTERM / Ctrl-C (C4, C5), a failed
env worker (C6), and the checks that refuse a checkpoint that does not fit (B2-B8)."""

import hashlib
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rlbench.cli.train import EXIT_INTERRUPTED, main
from rlbench.store.checkpoint import read_checkpoint
from tests.conftest import REPO_ROOT, TINY_LEARNER
from tests.variants import slow_variant

SAC_TINY = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "--seed",
    "7",
    "--log-interval",
    "-2",
    "-params",
    *TINY_LEARNER,
]
CROSSQ_TINY = [
    "--algo",
    "crossq",
    "--env",
    "Pendulum-v1",
    "--seed",
    "7",
    "--log-interval",
    "-2",
    "-params",
    "policy_kwargs:dict(net_arch=dict(pi=[16], qf=[32]), renorm_warmup_steps=150)",
    "learning_starts:100",
    "batch_size:32",
]

# TD3 with Ornstein-Uhlenbeck noise: the checkpoint (125 vector steps of 2 envs) falls mid-episode, where the
# noise of each env is far from its restart value; the resumed run must continue it, not restart it.
TD3_OU_TINY = [
    "--algo",
    "td3",
    "--env",
    "Pendulum-v1",
    "--seed",
    "7",
    "--log-interval",
    "-2",
    "-params",
    *TINY_LEARNER,
    "noise_type:'ornstein-uhlenbeck'",
    "noise_std:0.5",
]
# PPO with a rollout of 64 vector steps of 2 envs (128 env steps): the checkpoint (250 env steps) falls mid-way
# through the second rollout, which the checkpoint holds as staged transitions (with their time limits).
PPO_TINY = [
    "--algo",
    "ppo",
    "--env",
    "Pendulum-v1",
    "--seed",
    "7",
    "--log-interval",
    "-2",
    "-params",
    "n_steps:64",
    "batch_size:32",
    "n_epochs:2",
    "policy_kwargs:dict(net_arch=[16])",
]


def train_process(log_folder, *argv, check=True):
    proc = subprocess.run(
        [sys.executable, "train.py", "-f", str(log_folder), *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"train.py exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def run_dir(log_folder, algo, n):
    return Path(log_folder) / algo / f"Pendulum-v1_{n}"


def state_hash(path):
    return hashlib.sha256(zipfile.ZipFile(path).read("state.msgpack")).hexdigest()


@pytest.mark.parametrize(
    "algo,argv,extra",
    [
        # 2 envs and train_freq 3: the checkpoint (every 125 vector steps) falls between training iterations,
        # with collected-but-untrained transitions pending and episodes mid-way.
        ("sac", SAC_TINY, ["n_envs:2", "train_freq:3", "gradient_steps:2", "learning_rate:lin_1e-3"]),
        slow_variant("crossq", CROSSQ_TINY, []),
        # Training at the end of each 200-step episode (RL Zoo's train_freq [1, "episode"]): the checkpoint falls
        # mid-episode, and the resumed run must count the episodes and their steps as the first one did.
        slow_variant("sac", SAC_TINY, ["train_freq:[1, 'episode']", "gradient_steps:-1"]),
        slow_variant("td3", TD3_OU_TINY, ["n_envs:2", "train_freq:3", "gradient_steps:2"]),
        slow_variant("ppo", PPO_TINY, ["n_envs:2", "use_sde:False", "learning_rate:lin_1e-3", "clip_range:lin_0.2"]),
        # gSDE's held matrices and a rollout staged as the policy saw it (normalize) both continue.
        ("ppo", PPO_TINY, ["n_envs:2", "normalize:True", "use_sde:True", "sde_sample_freq:4"]),
    ],
)
def test_resume_from_a_checkpoint_is_bit_identical_to_never_stopping(tmp_path, algo, argv, extra):
    """I6: train 2N with a checkpoint at N; a new process resumes from N: same parameters, same
    evaluations, same counters."""
    argv = [*argv, *extra, "-n", "600", "--eval-freq", "200", "--eval-episodes", "2", "--verbose", "0"]
    train_process(tmp_path, *argv, "--save-freq", "250", "--save-replay-buffer")
    first = run_dir(tmp_path, algo, 1)
    checkpoint = first / "rl_model_250_steps.zip"
    assert sorted(p.name for p in first.glob("rl_model_*")) == ["rl_model_250_steps.zip", "rl_model_500_steps.zip"]
    resumed_proc = train_process(
        tmp_path,
        "--algo",
        algo,
        "--env",
        "Pendulum-v1",
        "-i",
        str(checkpoint),
        "--eval-freq",
        "200",
        "--eval-episodes",
        "2",
        "--verbose",
        "0",
    )
    assert "could not be restored" not in resumed_proc.stdout
    resumed = run_dir(tmp_path, algo, 2)
    assert state_hash(first / "Pendulum-v1.zip") == state_hash(resumed / "Pendulum-v1.zip")
    original, continued = np.load(first / "evaluations.npz"), np.load(resumed / "evaluations.npz")
    np.testing.assert_array_equal(original["timesteps"], continued["timesteps"])
    np.testing.assert_array_equal(original["results"], continued["results"])
    a = read_checkpoint(first / "Pendulum-v1.zip").manifest.counters
    b = read_checkpoint(resumed / "Pendulum-v1.zip").manifest.counters
    assert a == b and a.env_steps == 600


def wait_for(path_or_proc_output, predicate, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {path_or_proc_output}")


def test_sigterm_mid_run_checkpoints_exits_75_and_resumes_bit_identically(tmp_path):
    """C4: a SIGTERM at an arbitrary step: checkpoint (with the buffer), exit 75; the resumed run ends
    where an uninterrupted run ends, bit for bit."""
    argv = [*SAC_TINY, "-n", "2000", "--eval-freq", "500", "--eval-episodes", "2", "--verbose", "1"]
    log = tmp_path / "stopped.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "a"), *argv],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_for(log, lambda: "Eval num_timesteps=500" in log.read_text() or proc.poll() is not None)
        # The uninterrupted reference runs meanwhile (it loads what the first run compiled from the cache).
        reference = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "b"), *argv[:-2], "--verbose", "0"],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-2000:]
    text = log.read_text()
    assert "Stopped by SIGTERM" in text and "Resume with: python train.py" in text
    checkpoints = list(run_dir(tmp_path / "a", "sac", 1).glob("rl_model_*_steps.zip"))
    assert len(checkpoints) == 1
    stopped = read_checkpoint(checkpoints[0])
    assert stopped.manifest.replay_buffer and 500 <= stopped.manifest.counters.env_steps < 2000
    train_process(
        tmp_path / "a",
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-i",
        str(checkpoints[0]),
        "--eval-freq",
        "500",
        "--eval-episodes",
        "2",
        "--verbose",
        "0",
    )
    _, err = reference.communicate(timeout=900)
    assert reference.returncode == 0, err[-3000:]
    assert state_hash(run_dir(tmp_path / "a", "sac", 2) / "Pendulum-v1.zip") == state_hash(
        run_dir(tmp_path / "b", "sac", 1) / "Pendulum-v1.zip"
    )


def process_group_exists(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", [slow_variant(signal.SIGINT), signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_the_process_group_with_subprocess_envs_checkpoints_and_resumes(tmp_path, signum):
    """C4, C5: Ctrl-C, or a scheduler's SIGTERM (SLURM signals the whole process group), reaches the trainer,
    its env workers and the forkserver; the workers ignore it, the trainer checkpoints and exits 75, no
    process of the group outlives it, and the run resumes exactly (every worker replays its episode) to
    its end, with its own Monitor files."""
    argv = [
        *SAC_TINY,
        "n_envs:2",
        "-n",
        "3000",
        "--vec-env",
        "subproc",
        "--eval-freq",
        "-1",
        "--verbose",
        "1",
        "--log-interval",
        "1",
    ]
    log = tmp_path / "stopped.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path), *argv],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        wait_for(log, lambda: "train/critic_loss" in log.read_text() or proc.poll() is not None)
        os.killpg(proc.pid, signum)  # kill -<SIG> -- -<pgid>
        assert proc.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-2000:]
    wait_for("the env workers to exit", lambda: not process_group_exists(proc.pid), timeout=10)
    assert f"{signal.Signals(signum).name} received" in log.read_text()
    (checkpoint,) = run_dir(tmp_path, "sac", 1).glob("rl_model_*_steps.zip")
    steps = read_checkpoint(checkpoint).manifest.counters.env_steps
    assert 0 < steps < 3000
    resumed = train_process(
        tmp_path,
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-i",
        str(checkpoint),
        "--vec-env",
        "subproc",
        "--eval-freq",
        "-1",
    )
    assert f"Resuming from {checkpoint} at {steps} env steps" in resumed.stdout
    assert "could not be restored" not in resumed.stdout  # both workers replayed their episodes exactly
    final = read_checkpoint(run_dir(tmp_path, "sac", 2) / "Pendulum-v1.zip").manifest.counters
    assert final.env_steps == 3000
    monitor = (run_dir(tmp_path, "sac", 2) / "0.monitor.csv").read_text().splitlines()
    # Each env ends an episode every 200 of its steps: 7 in 1500; those after the resume are in the new folder.
    assert len(monitor) == 2 + 7 - steps // 2 // 200


def test_failed_env_worker_writes_a_checkpoint_first(tmp_path, capsys):
    """C6: the worker is named, exit 1, and a resumable checkpoint (buffer included) exists."""
    code = main(
        [
            "-f",
            str(tmp_path),
            "--algo",
            "sac",
            "--env",
            "tests.envs:Crash-v0",
            "--vec-env",
            "subproc",
            "--env-kwargs",
            "at_step:30",
            "--eval-freq",
            "-1",
            "--verbose",
            "0",
            "-params",
            "n_envs:2",
            "learning_starts:10",
            "policy_kwargs:dict(net_arch=[8])",
            "-n",
            "1000",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "worker" in err and "checkpoint written before the failure" in err
    (checkpoint,) = (tmp_path / "sac").glob("*/rl_model_*_steps.zip")
    manifest = read_checkpoint(checkpoint).manifest
    assert manifest.replay_buffer and manifest.counters.env_steps == 58


@pytest.fixture(scope="module")
def pendulum_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained")
    train_process(
        folder,
        *SAC_TINY,
        "-n",
        "300",
        "--eval-freq",
        "300",
        "--eval-episodes",
        "1",
        "--verbose",
        "0",
        "--save-replay-buffer",
    )
    return folder / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip"  # with its replay buffer; best_model.zip without


def resume_cli(tmp_path, model, *argv):
    return main(["-f", str(tmp_path / "logs"), "--verbose", "1", "--eval-freq", "-1", "-i", str(model), *argv])


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--algo", "sac", "--env", "MountainCarContinuous-v0"],
            r"observation space mismatch: saved=float32\[3\] current=float32\[2\]",
        ),
        (["--algo", "crossq", "--env", "Pendulum-v1"], "trained with --algo sac, but --algo crossq"),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "-params", "policy_kwargs:dict(net_arch=[64])"],
            "net_arch.*architecture cannot change on resume",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "-params", "policy:SimbaPolicy"],
            "^error: -params policy: 'SimbaPolicy' differs from 'MlpPolicy' saved in .*family cannot change on resume",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "-params", "precision:bfloat16"],
            "precision: 'bfloat16' differs from 'float32' saved in .*cannot change on resume",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "-params", "buffer_size:5000"],
            "its replay buffer has buffer_size=1000, the configuration 5000",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "-params", "ent_coef:0.1"],
            r"saved learner state has \d+ arrays, this configuration \d+",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "--eval-freq", "100", "--eval-episodes", "3"],
            r"--eval-episodes 3: .*evaluations ran 1 episodes each.*resume with --eval-episodes 1",
        ),
        (
            ["--algo", "sac", "--env", "Pendulum-v1", "--n-seeds", "2"],
            r"--n-seeds 2: .* is a one-seed run's checkpoint; resume it without --n-seeds",
        ),
    ],
)
def test_checkpoint_that_does_not_fit_exits_2_before_any_file(tmp_path, capsys, pendulum_model, argv, message):
    """B2, B6, B7: a clear error naming both sides, and no run folder."""
    import re

    assert resume_cli(tmp_path, pendulum_model, *argv) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "logs").exists()


def test_corrupt_checkpoint_exits_1_naming_the_reason(tmp_path, capsys, pendulum_model):
    """B5 through the command line."""
    torn = tmp_path / "torn.zip"
    torn.write_bytes(pendulum_model.read_bytes()[:5000])
    assert resume_cli(tmp_path, torn, "--algo", "sac", "--env", "Pendulum-v1") == 1
    assert f"corrupt or incomplete checkpoint: {torn} (not a zip archive or truncated" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


def test_bounds_only_mismatch_needs_the_flag(tmp_path, capsys):
    """B3: same shapes, other bounds: refused unless --allow-space-bounds-mismatch."""
    argv = [
        "--algo",
        "sac",
        "--env",
        "tests.envs:Counting-v0",
        "-params",
        "policy_kwargs:dict(net_arch=[8])",
        "learning_starts:10",
    ]
    assert main(["-f", str(tmp_path / "a"), *argv, "-n", "30", "--eval-freq", "-1", "--verbose", "0"]) == 0
    model = tmp_path / "a" / "sac" / "tests.envs_Counting-v0_1" / "tests.envs_Counting-v0.zip"
    other = ["--algo", "sac", "--env", "tests.envs:Counting-v0", "--env-kwargs", "action_high:1.0"]
    assert resume_cli(tmp_path, model, *other) == 2
    assert "action space bounds differ" in capsys.readouterr().err
    assert resume_cli(tmp_path, model, *other, "-n", "10", "--allow-space-bounds-mismatch") == 0


def test_resume_without_buffer_with_more_envs_keeps_counters_and_allows_optimizer_changes(
    tmp_path, capsys, pendulum_model
):
    """B4, B7: n_envs may change (counters kept); learning_rate may change (reported); a model
    without a buffer (best_model.zip) refills learning_starts transitions before training again."""
    best_model = pendulum_model.parent / "best_model.zip"
    assert not read_checkpoint(best_model).manifest.replay_buffer
    # The saved network given again in another spelling (a list for dict(pi=..., qf=...)) is no change.
    assert (
        resume_cli(
            tmp_path,
            best_model,
            "--algo",
            "sac",
            "--env",
            "Pendulum-v1",
            "-n",
            "200",
            "-params",
            "n_envs:2",
            "learning_rate:1e-4",
            "policy_kwargs:dict(net_arch=[16])",
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Resume: learning_rate changed from 0.001 to 0.0001" in out
    assert "holds no replay buffer: training resumes once 100 new transitions are collected (at 400" in out
    final = read_checkpoint(tmp_path / "logs" / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip").manifest
    assert final.counters.env_steps == 500 and final.run.n_envs == 2
    assert final.counters.gradient_steps == 200 + 50  # 200 before; (500 - 400) / 2 envs after
    assert final.run.hyperparams["learning_rate"] == 0.0001


@pytest.mark.slow  # about 20 s: two HalfCheetah runs
def test_a_mujoco_run_resumed_mid_episode_is_bit_identical_to_never_stopping(tmp_path):
    """I6 on a MuJoCo env (float64 observations): the checkpoint at 1,250 env steps falls 250 steps into the
    second episode, which resume rebuilds by replaying it. It restarted the episode instead (a float32 copy
    of the replayed observation compared with the saved float64 one), and the run went elsewhere: found
    when a sweep continued a HalfCheetah cell."""
    argv = ["--algo", "sac", "--env", "HalfCheetah-v4", "--seed", "3", "--eval-freq", "0", "--verbose", "0"]
    saving = ["--save-freq", "1250", "--save-replay-buffer"]
    train_process(tmp_path, *argv, "-n", "1500", *saving, "-params", *TINY_LEARNER)
    first = tmp_path / "sac" / "HalfCheetah-v4_1"
    resumed_proc = train_process(tmp_path, *argv, "-i", str(first / "rl_model_1250_steps.zip"))
    assert "could not be restored" not in resumed_proc.stdout
    resumed = tmp_path / "sac" / "HalfCheetah-v4_2"
    assert state_hash(first / "HalfCheetah-v4.zip") == state_hash(resumed / "HalfCheetah-v4.zip")
