"""The device loop (rlbench.loop.device) on JAX-native envs: it computes what the host loop computes on the
same env wrapped for gymnasium, its seeds start as single runs, it resumes bit-exactly mid-episode, and the
run folder is the host loop's."""

import hashlib
import signal
import subprocess
import sys
import time
import zipfile

import jax
import numpy as np
import optuna
import pytest

from rlbench.algos.crossq.config import CrossQConfig
from rlbench.algos.sac.config import SACConfig
from rlbench.cli.enjoy import main as enjoy_main
from rlbench.cli.train import EXIT_INTERRUPTED, main
from rlbench.config.entry import RunConfig
from rlbench.config.hyperparams import merge
from rlbench.config.registry import ALGORITHMS
from rlbench.loggers.base import MultiLogger
from rlbench.loop.device import runner as device_runner
from rlbench.loop.device.runner import train_seeds_on_device
from rlbench.loop.run_state import SeedOutput
from rlbench.networks.mlp import NetworkConfig
from rlbench.run import probe
from rlbench.store.checkpoint import read_checkpoint
from rlbench.tuning.study import make_storage
from tests.conftest import REPO_ROOT, tiny_config
from tests.integration.test_env_semantics import Q_CONFIG, q_value
from tests.integration.test_resume import wait_for
from tests.loop_runs import train
from tests.variants import slow_variant

pytest.importorskip("gymnax")

ENV = "gymnax:Pendulum-v1"
NO_LOG = lambda names: MultiLogger([])  # noqa: E731
# Episodes of 50 steps: every run below crosses several episode ends (resets, truncations).
SHORT = {"max_steps_in_episode": 50}


def configs(algo):
    common = dict(learning_starts=0, batch_size=16, buffer_size=1000, train_freq=2, gradient_steps=2)
    if algo == "td3":  # Ornstein-Uhlenbeck noise: an exploration state per env, restarted at episode starts
        entry = {**common, "policy_kwargs": {"net_arch": [8, 8]}, "noise_type": "ornstein-uhlenbeck", "noise_std": 0.5}
        return ALGORITHMS["td3"].build_config(merge(ALGORITHMS["td3"].preset, entry), 2, "test")
    if algo == "sac-gsde":  # gSDE's matrices, redrawn at every rollout's start and every 3 vector steps into it
        entry = {**common, "train_freq": 4, "policy_kwargs": {"net_arch": [8, 8]}, "use_sde": True}
        return ALGORITHMS["sac"].build_config({**entry, "sde_sample_freq": 3}, 2, "test")
    if algo == "crossq":
        net = NetworkConfig(hidden=(16,), batch_norm=True)
        return tiny_config(CrossQConfig, **common, actor=net, critic=NetworkConfig(hidden=(32,), batch_norm=True))
    return tiny_config(SACConfig, **common)


def rows(result):
    return np.asarray(result.buffer_state.rows[: int(result.buffer_state.size)])


@pytest.mark.parametrize("algo", ["sac-gsde", slow_variant("sac"), slow_variant("crossq"), slow_variant("td3")])
def test_the_device_loop_computes_what_the_host_loop_computes_on_the_same_env(algo):
    """The same learner and seed on gymnax's Pendulum: the host loop on it wrapped for gymnasium (JaxGymEnv, a
    vector env of 2, actions rescaled by gymnasium's RescaleAction in numpy), the device loop on it unwrapped.
    Equal transitions (every buffer row) and parameters after 240 env steps, 4 episode ends, 60-120 updates;
    to float tolerance only because numpy and XLA rescale the actions in a different order of operations."""
    cfg = configs(algo)
    run = RunConfig(env_id=ENV, n_timesteps=240, n_envs=2, env_kwargs=SHORT, seed=3, eval_freq=-1, verbose=0)
    learner = ALGORITHMS[algo.removesuffix("-gsde")]
    on_host = train(run, learner, cfg, NO_LOG)
    on_device = train_seeds_on_device(run, learner, cfg, [SeedOutput(NO_LOG)])
    assert on_device.env_steps == on_host.env_steps == 240
    host_rows, device_rows = rows(on_host), rows(on_device)
    assert host_rows.shape == device_rows.shape == (240, 2 * 3 + 1 + 2)
    np.testing.assert_allclose(device_rows, host_rows, rtol=1e-4, atol=1e-5)
    assert int(on_device.state.step) == int(on_host.state.step) == 120 // cfg.train_freq * cfg.gradient_steps
    for host_leaf, device_leaf in zip(
        jax.tree.leaves(on_host.state.actor.params), jax.tree.leaves(on_device.state.actor.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-3, atol=1e-5)
    host_episodes = on_host.host.seeds[0].episodes
    device_episodes = on_device.host.seeds[0].episodes
    assert device_episodes.finished_lengths == host_episodes.finished_lengths == [50] * 4
    np.testing.assert_allclose(device_episodes.finished_returns, host_episodes.finished_returns, rtol=1e-4)


def test_k_vmapped_seeds_start_as_their_single_runs():
    """--n-seeds on the device loop: seed i's first transitions and state are seed i's single run's."""
    cfg = configs("sac")
    run = RunConfig(env_id=ENV, n_timesteps=20, n_envs=2, env_kwargs=SHORT, seed=5, eval_freq=-1, verbose=0)
    together = train_seeds_on_device(run, ALGORITHMS["sac"], cfg, [SeedOutput(NO_LOG)] * 2)
    for index in range(2):
        alone_run = RunConfig(**{**run.__dict__, "seed": 5 + index})
        alone = train_seeds_on_device(alone_run, ALGORITHMS["sac"], cfg, [SeedOutput(NO_LOG)])
        seed_rows = np.asarray(together.buffer_state.rows[index, :20])
        np.testing.assert_allclose(seed_rows, rows(alone), rtol=1e-5, atol=1e-6)
        first_layer = jax.tree.leaves(together.state.actor.params)[0][index]
        np.testing.assert_allclose(first_layer, jax.tree.leaves(alone.state.actor.params)[0], rtol=1e-4, atol=1e-6)


DEVICE_TINY = [
    "--algo", "sac", "--env", ENV, "--seed", "7", "--log-interval", "2", "--verbose", "0",
    "--env-kwargs", "max_steps_in_episode:50",
    "-params", "learning_starts:40", "batch_size:16", "buffer_size:1000",
    "policy_kwargs:dict(net_arch=[16])", "n_envs:2", "train_freq:3", "gradient_steps:2",
]  # fmt: skip


def state_hash(path):
    return hashlib.sha256(zipfile.ZipFile(path).read("state.msgpack")).hexdigest()


def test_resume_mid_episode_is_bit_identical_and_the_run_folder_is_the_host_loop_s(tmp_path):
    """I6 on the device loop: 300 env steps with a checkpoint at 130 (65 vector steps: mid-episode, between
    training iterations); -i from it ends bit-identical. The run folder holds what a host-loop run's holds."""
    argv = [*DEVICE_TINY, "-n", "300", "--eval-freq", "100", "--eval-episodes", "2", "-f", str(tmp_path)]
    assert main([*argv, "--save-freq", "130", "--save-replay-buffer"]) == 0
    first = tmp_path / "sac" / "gymnax_Pendulum-v1_1"
    resume = [
        "--algo", "sac", "--env", ENV, "-i", str(first / "rl_model_130_steps.zip"), "-f", str(tmp_path),
        "--eval-freq", "100", "--eval-episodes", "2", "--verbose", "0",
    ]  # fmt: skip
    assert main(resume) == 0
    second = tmp_path / "sac" / "gymnax_Pendulum-v1_2"
    assert state_hash(first / "gymnax_Pendulum-v1.zip") == state_hash(second / "gymnax_Pendulum-v1.zip")
    original, continued = np.load(first / "evaluations.npz"), np.load(second / "evaluations.npz")
    np.testing.assert_array_equal(original["timesteps"], [100, 200, 300])
    np.testing.assert_array_equal(continued["timesteps"], original["timesteps"])
    np.testing.assert_array_equal(continued["results"], original["results"])
    assert original["results"].shape == (3, 2)
    files = {path.name for path in first.iterdir()}
    assert {"evaluations.npz", "progress.csv", "gymnax_Pendulum-v1.zip", "best_model.zip"} <= files
    assert (first / "gymnax_Pendulum-v1" / "config.yml").is_file()
    monitor = (first / "0.monitor.csv").read_text().splitlines()
    assert len(monitor) == 2 + 3  # two header lines, then env 0's 150 steps: 3 episodes of 50
    progress = (first / "progress.csv").read_text().splitlines()
    assert "rollout/ep_rew_mean" in progress[0] and len(progress) > 2
    # enjoy.py replays the model on the env wrapped for gymnasium: two 50-step episodes.
    replay = ["--algo", "sac", "--env", ENV, "-f", str(tmp_path), "--exp-id", "1", "-n", "100", "--no-render"]
    assert enjoy_main(replay) == 0


def test_settings_the_device_loop_does_not_take_exit_2_before_any_folder(tmp_path, capsys):
    for extra, expected in (
        (["--vec-env", "subproc"], "--vec-env subproc"),
        (["-params", "normalize:True"], "normalize"),
    ):
        assert main([*DEVICE_TINY, "-n", "100", "-f", str(tmp_path), *extra]) == 2
        assert expected in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_truncation_bootstraps_and_termination_does_not_on_the_device_loop():
    """D1 and D2 on the device loop, as tests/integration/test_env_semantics.py checks the host loop's: reward 1
    forever, one constant observation. Cut by an 8-step time limit, bootstrapping from the final observation
    gives Q = 1 / (1 - 0.9) = 10 (1 / (1 - 0.9 * 7/8) = 4.7 if truncation were terminal); a true terminal state
    at step 8 gives Q = 1 + 0.9 * (7/8) * Q = 4.71."""
    import tests.jax_envs  # noqa: F401  (registers the envs)

    cfg = tiny_config(SACConfig, **Q_CONFIG, tau=0.05)
    for env_id, expected in (("tests.jax_envs:InfiniteHorizon-v0", 10.0), ("tests.jax_envs:TerminateAt8-v0", 4.71)):
        run = RunConfig(env_id=env_id, n_timesteps=3000, seed=0, eval_freq=-1, verbose=0)
        result = train_seeds_on_device(run, ALGORITHMS["sac"], cfg, [SeedOutput(NO_LOG)])
        assert abs(q_value(cfg, result) - expected) < 0.7, env_id
        terminated = rows(result)[:, -1]
        if expected == 10.0:
            assert terminated.sum() == 0  # truncations are never stored as terminal
        else:
            np.testing.assert_array_equal(np.flatnonzero(terminated) % 8, 7)


def test_sigterm_on_the_device_loop_checkpoints_at_the_chunk_s_end_exits_75_and_resumes_bit_identically(tmp_path):
    """C4 on the device loop: the signal is seen when the running chunk returns; the checkpoint holds the buffer
    and the envs mid-episode; the resumed run ends where an uninterrupted run ends, bit for bit."""
    # 8000 steps: at about 1,000 env steps/s on an idle CI machine, 3000 ended before the signal arrived.
    argv = [*DEVICE_TINY, "-n", "8000", "--eval-freq", "200", "--eval-episodes", "2"]
    log = tmp_path / "stopped.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "a"), *argv, "--verbose", "1"],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=out,
        )
        wait_for(log, lambda: "Eval num_timesteps=400" in log.read_text() or proc.poll() is not None)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-2000:]
    assert "Stopped by SIGTERM" in log.read_text()
    first = tmp_path / "a" / "sac" / "gymnax_Pendulum-v1_1"
    (checkpoint,) = first.glob("rl_model_*_steps.zip")
    stopped = read_checkpoint(checkpoint).manifest
    assert stopped.replay_buffer and 400 <= stopped.counters.env_steps < 8000
    resume = ["--algo", "sac", "--env", ENV, "-i", str(checkpoint), "-f", str(tmp_path / "a"), "--verbose", "0"]
    assert main([*resume, "--eval-freq", "200", "--eval-episodes", "2"]) == 0
    assert main([*argv, "-f", str(tmp_path / "b")]) == 0
    reference = tmp_path / "b" / "sac" / "gymnax_Pendulum-v1_1" / "gymnax_Pendulum-v1.zip"
    assert state_hash(first.parent / "gymnax_Pendulum-v1_2" / "gymnax_Pendulum-v1.zip") == state_hash(reference)


def test_a_diverging_learner_on_the_device_loop_ends_the_run_with_its_last_finite_state(tmp_path, capsys):
    """C12 on the device loop: rewards of 1e38 from env step 300 overflow the critic; the check at a chunk's end
    finds it, exit 1, and the checkpoint holds the state of the last chunk end found finite."""
    import tests.jax_envs  # noqa: F401  (registers the envs)

    argv = ["--algo", "sac", "--env", "tests.jax_envs:BlowUp-v0", "-f", str(tmp_path), "-n", "3000"]
    argv += ["--eval-freq", "-1", "--save-freq", "200", "--verbose", "0"]
    assert main([*argv, "-params", "learning_starts:100", "batch_size:8", "policy_kwargs:dict(net_arch=[16])"]) == 1
    err = capsys.readouterr().err
    assert "training diverged at env step" in err
    (checkpoint,) = [
        path
        for path in (tmp_path / "sac").glob("*/rl_model_*_steps.zip")
        if "failure" in str(read_checkpoint(path).manifest.kind)
    ]
    divergence = read_checkpoint(checkpoint).manifest.divergence
    assert divergence.learner_state_from_env_steps < divergence.detected_at_env_steps <= 600
    assert divergence.learner_state_from_env_steps % 200 == 0


def test_an_optuna_study_on_a_jax_native_env_trains_its_trials_with_the_device_loop(tmp_path):
    """-optimize on gymnax:Pendulum-v1: each trial is a device-loop run, its evaluations reported to the pruner."""
    argv = ["-f", str(tmp_path), "-optimize", "--algo", "sac", "--env", ENV, "-n", "300", "--n-evaluations", "2"]
    argv += ["--n-trials", "2", "--seed", "3", "--n-startup-trials", "1", "--verbose", "0"]
    assert main([*argv, "-params", "policy_kwargs:dict(net_arch=[16])", "learning_starts:100"]) == 0
    storage = make_storage(str(tmp_path / "sac" / "optuna_gymnax_Pendulum-v1.log"))
    (study,) = optuna.get_all_study_summaries(storage)
    done = optuna.load_study(storage=storage, study_name=study.study_name).get_trials()
    assert len(done) == 2 and all(trial.state.name in ("COMPLETE", "PRUNED") for trial in done)
    assert all(len(trial.intermediate_values) >= 1 for trial in done)  # the device loop's evaluations


def test_an_evaluation_split_into_calls_gives_what_one_call_gives_bit_for_bit(tmp_path, monkeypatch):
    """Issue 44 item 3: an evaluation runs in calls that return to the host (to poll for a stop); however it
    is split, each vector step computes the same. 16-step calls (and chunks) against the default 1000: 7
    episodes of 50 steps on 3 eval envs take at least 117 vector steps, so at least 8 calls each time."""
    argv = [*DEVICE_TINY, "-n", "600", "--eval-freq", "200", "--eval-episodes", "7", "--n-eval-envs", "3"]
    assert main([*argv, "--n-seeds", "2", "-f", str(tmp_path / "whole")]) == 0
    monkeypatch.setattr(device_runner, "CHUNK_ENV_STEPS", 1)  # 16 vector steps: the floor of chunk_length
    assert device_runner.chunk_length(3) == 16
    assert main([*argv, "--n-seeds", "2", "-f", str(tmp_path / "split")]) == 0
    for seed in (1, 2):
        whole = tmp_path / "whole" / "sac" / f"gymnax_Pendulum-v1_{seed}"
        split = tmp_path / "split" / "sac" / f"gymnax_Pendulum-v1_{seed}"
        expected, got = np.load(whole / "evaluations.npz"), np.load(split / "evaluations.npz")
        assert expected["results"].shape == (3, 7)
        for name in ("timesteps", "results", "ep_lengths"):
            np.testing.assert_array_equal(got[name], expected[name])
        assert state_hash(split / "gymnax_Pendulum-v1.zip") == state_hash(whole / "gymnax_Pendulum-v1.zip")


def test_a_chunk_takes_at_most_a_thousand_gradient_steps():
    """Issue 44 item 3: one compiled chunk is bounded in gradient steps too, not only in env steps."""
    assert device_runner.chunk_length(1) == 1000  # SAC's defaults: one gradient step per env step, as before
    assert device_runner.chunk_length(128) == 128
    assert device_runner.chunk_length(1, gradient_steps=64, train_freq=1) == 15  # was 1000 (64,000 gradient steps)
    assert device_runner.chunk_length(128, gradient_steps=16, train_freq=1) == 62
    assert device_runner.chunk_length(1, gradient_steps=5000, train_freq=1) == 1  # at least one vector step


def test_sigterm_during_a_long_device_evaluation_checkpoints_and_exits_75_within_seconds(tmp_path):
    """Issue 44 item 3: an evaluation of 2,000,000 episodes (hours) is accepted; a SIGTERM during it is answered
    between two of its calls: the evaluation is dropped, the checkpoint written where it fell due, exit 75; the
    continuation makes that evaluation first."""
    argv = [*DEVICE_TINY, "-n", "8000", "--eval-freq", "100", "--eval-episodes", "2000000", "--verbose", "1"]
    log, run_dir = tmp_path / "stopped.log", tmp_path / "sac" / "gymnax_Pendulum-v1_1"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path), *argv], cwd=REPO_ROOT, stdout=out, stderr=out
        )
        try:
            monitor = run_dir / "0.monitor.csv"  # the first chunk's episode: the evaluation at 100 starts
            first_chunk_ended = lambda: monitor.is_file() and monitor.read_text().count("\n") > 2  # noqa: E731
            wait_for(log, lambda: proc.poll() is not None or first_chunk_ended())
            time.sleep(2)  # its program compiles, then it runs
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            assert proc.wait(timeout=60) == EXIT_INTERRUPTED, log.read_text()[-2000:]
        finally:
            proc.kill()
    assert time.monotonic() - sent < 20, log.read_text()[-2000:]  # the first chunk and compilation: seconds
    text = log.read_text()
    assert "Stopped by SIGTERM at 100 env steps" in text and "Resume with:" in text
    checkpoint = run_dir / "rl_model_100_steps.zip"
    assert read_checkpoint(checkpoint).manifest.counters.env_steps == 100
    assert not (run_dir / "evaluations.npz").exists()  # the evaluation cut short is not recorded
    # The continuation makes it first (here of 2 episodes), then goes on: 100 more env steps.
    resume = ["--algo", "sac", "--env", ENV, "-i", str(checkpoint), "-f", str(tmp_path), "-n", "100"]
    assert main([*resume, "--eval-freq", "100", "--eval-episodes", "2", "--verbose", "0"]) == 0
    evaluations = np.load(tmp_path / "sac" / "gymnax_Pendulum-v1_2" / "evaluations.npz")
    np.testing.assert_array_equal(evaluations["timesteps"], [100, 200])


def test_an_episode_count_an_evaluation_cannot_hold_exits_2_before_any_folder(tmp_path, capsys, monkeypatch):
    """Issue 44 item 3: beyond int32 (the device loop's episode counters), or beyond the memory available for
    the episodes' returns and lengths: one line, exit 2, nothing written."""
    argv = [*DEVICE_TINY, "-n", "100", "-f", str(tmp_path)]
    assert main([*argv, "--eval-episodes", str(2**31)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: --eval-episodes 2147483648: at most 2,147,483,647 (2**31-1): the device loop counts an "
        "evaluation's episodes in int32"
    )
    monkeypatch.setattr(probe, "available_memory_bytes", lambda: 2**30)
    assert main([*argv, "--eval-episodes", str(50_000_000)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --eval-episodes 50000000: an evaluation keeps each episode's return and length")
    assert "(24 B: 1.12 GiB) but only 1.00 GiB is available" in err and "\n" not in err
    assert not any(tmp_path.iterdir())


def test_env_kwargs_that_are_not_finite_or_make_inf_action_bounds_exit_2_before_any_folder(tmp_path, capsys):
    """Issue 44 items 6 and 7: `max_torque: .nan` in a -conf file (gymnasium's ValueError traceback, exit 1),
    `--env-kwargs max_torque:1e308` (float32 inf action bounds: a run folder, a diverged run) and `g:1e999`
    (stored as inf, trained): one line each, exit 2, nothing written."""
    conf = tmp_path / "conf.yml"
    conf.write_text(f"{ENV}:\n  policy: MlpPolicy\n  env_kwargs:\n    max_torque: .nan\n")
    runs = tmp_path / "runs"
    cases = (
        (["-conf", str(conf)], "--env-kwargs / env_kwargs: gymnax:Pendulum-v1's max_torque=nan is not finite"),
        (["--env-kwargs", "max_torque:1e308"], "gymnax:Pendulum-v1 with max_torque=1e+308: action bounds"),
        (["--env-kwargs", "g:1e999"], "--env-kwargs / env_kwargs: gymnax:Pendulum-v1's g=inf is not finite"),
        (["--eval-freq", "100", "--eval-env-kwargs", "max_torque:1e308"], "--eval-env-kwargs: gymnax:Pendulum-v1"),
    )
    for extra, expected in cases:
        assert main([*DEVICE_TINY, "-n", "100", "-f", str(runs), *extra]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("error: ") and expected in line, line
    assert not runs.exists()
