"""Failures during training: nothing lost, one clear message, exit 1 (RELIABILITY C6, C12, D8), and what the
loop writes for other tools (SB3 Monitor files) or shows (the progress bar's rate)."""

import csv
import json
import re
import subprocess
import sys
import zipfile

import jax
import numpy as np
import pytest
from flax.serialization import msgpack_restore

import tests.envs  # noqa: F401  (registers the test envs)
from rlbench.cli.train import main
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.envs.checks import check_env_runs
from rlbench.errors import ConfigError
from rlbench.loggers.base import MultiLogger
from rlbench.loop.metrics_log import TrainingRate
from rlbench.store.checkpoint import read_checkpoint
from rlbench.store.manifest import Divergence
from tests.conftest import REPO_ROOT, tiny_sac_config
from tests.loop_runs import train

TINY = [
    "--algo",
    "sac",
    "--verbose",
    "0",
    "--seed",
    "3",
    "-params",
    "learning_starts:100",
    "batch_size:8",
    "buffer_size:1000",
    "policy_kwargs:dict(net_arch=[16])",
]


def only_checkpoint(log_folder):
    (path,) = log_folder.glob("sac/*/rl_model_*_steps.zip")
    return path


def test_env_raising_in_the_trainer_process_checkpoints_and_exits_1(tmp_path, capsys):
    """C6 with the default in-process envs: the env index and the exception are named, its traceback shown,
    and the checkpoint (with the buffer) holds every step before the failing one."""
    code = main(
        [
            "-f",
            str(tmp_path),
            "--env",
            "tests.envs:Crash-v0",
            "--env-kwargs",
            "at_step:150",
            "--eval-freq",
            "-1",
            "-n",
            "1000",
            *TINY,
            "n_envs:2",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "error: environment 0 raised RuntimeError: CrashEnv failed on purpose at step 150" in err
    assert 'tests/envs.py", line' in err  # the env's own frames
    checkpoint = only_checkpoint(tmp_path)
    assert f"checkpoint written before the failure: {checkpoint}" in err
    manifest = read_checkpoint(checkpoint).manifest
    assert manifest.replay_buffer and manifest.counters.env_steps == 2 * 149


def test_failing_evaluation_checkpoints_first(tmp_path, capsys):
    """An evaluation env that raises (here from --eval-env-kwargs) stops the run only after a checkpoint."""
    code = main(
        [
            "-f",
            str(tmp_path),
            "--env",
            "tests.envs:Crash-v0",
            "--env-kwargs",
            "at_step:100000",
            "--eval-env-kwargs",
            "at_step:3",
            "--eval-freq",
            "200",
            "-n",
            "1000",
            *TINY,
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "error: evaluation at env step 200 failed: environment 0 raised RuntimeError" in err
    checkpoint = only_checkpoint(tmp_path)
    assert checkpoint.name == "rl_model_200_steps.zip" and f"checkpoint written before the failure: {checkpoint}" in err
    assert read_checkpoint(checkpoint).manifest.replay_buffer


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"nonexistent_kw": 1}, "TypeError: .*nonexistent_kw"),
        ({"g": "abc"}, "g='abc'"),  # accepted by the constructor, fails at the first step
    ],
)
def test_env_kwargs_the_env_cannot_use_are_one_config_error(kwargs, message):
    with pytest.raises(ConfigError, match=f"^--eval-env-kwargs: Pendulum-v1 fails with .*{message}") as caught:
        check_env_runs("Pendulum-v1", kwargs, (), (), "--eval-env-kwargs")
    assert "\n" not in str(caught.value)
    check_env_runs("Pendulum-v1", {"g": 9.81}, (), (), "--eval-env-kwargs")


def test_divergence_stops_with_a_finite_checkpoint_from_before_it(tmp_path, capsys):
    """C12: rewards of 1e38 from env step 300 on overflow the critic. The run stops with exit 1, names the
    non-finite key, the step and the last finite values, and its checkpoint holds the last finite learner
    state (never a NaN), loads, and resumes."""
    code = main(
        [
            "-f",
            str(tmp_path),
            "--env",
            "tests.envs:BlowUp-v0",
            "--eval-freq",
            "-1",
            "-n",
            "3000",
            "--log-interval",
            "1",
            *TINY,
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "error: training diverged at env step 3" in err
    assert "non-finite train/critic_loss; learner state actor.params" in err
    assert "Last finite check at env step 300: train/actor_loss=" in err
    checkpoint = only_checkpoint(tmp_path)
    assert f"checkpoint with the learner state from env step 300: {checkpoint}" in err
    saved = read_checkpoint(checkpoint)
    divergence = saved.manifest.divergence
    assert divergence.learner_state_from_env_steps == 300 < divergence.detected_at_env_steps
    assert saved.manifest.counters.gradient_steps == 300 - 100
    assert all(np.isfinite(value).all() for value in saved.arrays.values() if value.dtype.kind == "f")
    assert all(np.isfinite(value) for value in saved.manifest.host.metrics.values())
    state = jax.tree.leaves(msgpack_restore(saved.state_bytes))
    assert all(np.isfinite(leaf).all() for leaf in state if np.asarray(leaf).dtype.kind == "f")
    assert "next_action" not in saved.group("host")  # chosen by the diverged actor
    assert b"nan" not in zipfile.ZipFile(checkpoint).read("manifest.json").lower()
    resumed = main(
        [
            "-f",
            str(tmp_path / "resumed"),
            "--algo",
            "sac",
            "--env",
            "tests.envs:BlowUp-v0",
            "-i",
            str(checkpoint),
            "--eval-freq",
            "-1",
            "-n",
            "10",
            "--verbose",
            "0",
        ]
    )
    assert resumed in (0, 1)  # the env still returns 1e38: it may diverge again, but the state loads


def test_periodic_checkpoint_refuses_a_diverged_learner_state(tmp_path, capsys):
    """C12 where only the critic diverges (the actor is not updated yet: its actions stay finite) and no
    metrics are logged: the next periodic checkpoint finds the NaN and writes the last finite state instead."""
    code = main(
        [
            "-f",
            str(tmp_path),
            "--env",
            "tests.envs:BlowUp-v0",
            "--eval-freq",
            "-1",
            "-n",
            "3000",
            "--log-interval",
            "-2",
            "--save-freq",
            "40",
            *TINY,
            "policy_delay:1000",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "error: training diverged at env step 320: non-finite " in err and "learner state critic." in err
    assert re.search(r"Last finite check at env step 280: train/critic_loss=\d", err)
    saved = read_checkpoint(tmp_path / "sac" / "tests.envs_BlowUp-v0_1" / "rl_model_320_steps.zip")
    assert saved.manifest.divergence == Divergence(detected_at_env_steps=320, learner_state_from_env_steps=280)
    state = jax.tree.leaves(msgpack_restore(saved.state_bytes))
    assert all(np.isfinite(leaf).all() for leaf in state if np.asarray(leaf).dtype.kind == "f")


def run_with_monitor(tmp_path, **overrides):
    config = RunConfig(
        **{
            **dict(env_id="Pendulum-v1", n_timesteps=1600, n_envs=2, seed=5, eval_freq=400, eval_episodes=1, verbose=0),
            **overrides,
        }
    )
    return train(
        config,
        ALGORITHMS["sac"],
        tiny_sac_config(learning_starts=10_000),
        lambda names: MultiLogger([]),
        run_dir=tmp_path,
    )


def test_monitor_files_hold_the_training_episodes_as_sb3_writes_them(tmp_path):
    """SB3's Monitor format, one file per training env; evaluation episodes are not in them."""
    result = run_with_monitor(tmp_path)
    returns = result.episode_returns  # 8 episodes of 200 steps: the envs finish together, env 0 first
    assert len(returns) == 8
    for index in range(2):
        text = (tmp_path / f"{index}.monitor.csv").read_bytes().decode()
        first, header, *rows = text.split("\n")
        assert first.startswith("#") and set(json.loads(first[1:])) == {"t_start", "env_id"}
        assert json.loads(first[1:])["env_id"] == "Pendulum-v1"
        assert header == "r,l,t\r" and rows[-1] == ""
        parsed = list(csv.DictReader(text.splitlines()[1:]))
        assert [row["r"] for row in parsed] == [str(round(r, 6)) for r in returns[index::2]]
        assert [row["l"] for row in parsed] == ["200"] * 4
        times = [float(row["t"]) for row in parsed]
        assert times == sorted(times) and times[0] > 0 and times[-1] < result.wall_time + 5
    assert len(result.evaluations.timesteps) == 4  # evaluations ran, and added no rows


def test_training_rate_ignores_warmup_and_compilation():
    """The progress bar's rate: 1000 warm-up steps in 1 s and a 10 s compilation, then 100 steps/s. Measured
    from the start, it would read 1000 steps/s during warm-up, then 1500 / 16 = 94 and an ETA 6% off."""
    now = [0.0]
    rate = TrainingRate(clock=lambda: now[0])
    assert rate.rate(500) is None and rate.eta(500, 2000) is None  # warm-up: no training rate yet
    now[0] = 11.0  # the first training iteration returns at step 1000, after compiling
    rate.start(1000)
    assert rate.rate(1000) is None
    now[0] = 16.0
    assert rate.rate(1500) == pytest.approx(100.0)
    assert rate.eta(1500, 2000) == pytest.approx(5.0)


@pytest.mark.parametrize("vec_env", ["dummy", "subproc"])
def test_an_env_construction_warning_is_shown_once(tmp_path, vec_env):
    """An out-of-date env id (as MuJoCo's -v4) is reported once, not once more per subprocess worker."""
    proc = subprocess.run(
        [
            sys.executable,
            "train.py",
            "-f",
            str(tmp_path),
            "--env",
            "tests.envs:Versioned-v0",
            "--vec-env",
            vec_env,
            "-n",
            "30",
            "--eval-freq",
            "-1",
            *TINY,
            "n_envs:3",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("is out of date") == 1, proc.stderr


def test_learner_state_check_gives_one_flag_per_seed():
    """The divergence check is a function of one learner state: vmapped over seeds, one flag each."""
    from rlbench.algos.common.divergence import all_finite

    states = {"params": jax.numpy.array([[1.0, 2.0], [1.0, np.nan]]), "step": jax.numpy.array([1, 1])}
    np.testing.assert_array_equal(jax.vmap(all_finite)(states), [True, False])


def test_env_workers_do_not_outlive_a_killed_trainer(tmp_path):
    """C10: the workers ignore SIGTERM, so only their pipe tells them that the trainer is gone; after a
    SIGKILL of the trainer alone, every process of its group (workers, forkserver) exits by itself."""
    import os
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "train.py",
            "-f",
            str(tmp_path),
            "--env",
            "Pendulum-v1",
            "--vec-env",
            "subproc",
            "-n",
            "100000",
            "--eval-freq",
            "-1",
            "--log-interval",
            "1",
            *TINY,
            "n_envs:2",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    progress = tmp_path / "sac" / "Pendulum-v1_1" / "progress.csv"
    while not (progress.exists() and len(progress.read_text().splitlines()) > 2) and time.time() < deadline:
        assert proc.poll() is None, "train.py ended early"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)  # training, with its workers stepping
    proc.wait(timeout=60)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"processes of group {proc.pid} outlived the trainer by 10 s")
