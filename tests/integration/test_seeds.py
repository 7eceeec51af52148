"""Several seeds in one run (issue 16), in-process through runner.train_seeds: each seed starts as a single
run with that seed would, and a seed that diverges is frozen while the others train on."""

import csv
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pytest
import yaml

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import EXIT_INTERRUPTED
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.loggers.csv import CSVLogger
from rlbench.loop.divergence import FAILED_FILE
from rlbench.loop.run_state import SeedOutput
from rlbench.loop.runner import train_seeds
from rlbench.loop.saving import CheckpointSettings
from rlbench.run.memory import check_open_files
from rlbench.run.outputs import claim_run_dirs
from rlbench.store.checkpoint import read_checkpoint
from rlbench.store.learner_state import state_from_bytes
from tests.conftest import REPO_ROOT, TINY_LEARNER, tiny_sac_config
from tests.integration.test_env_semantics import NO_LOG
from tests.integration.test_resume import run_dir, state_hash, wait_for
from tests.integration.test_tracking import isolated_env
from tests.loop_runs import train
from tests.run_files import wandb_run
from tests.unit.test_manifest import describe_run


def leaves(tree):
    """Every leaf as a numpy array (PRNG keys as their raw data)."""
    return [
        np.asarray(jax.random.key_data(leaf) if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key) else leaf)
        for leaf in jax.tree.leaves(tree)
    ]


def test_each_seed_starts_exactly_as_a_single_run_with_that_seed():
    """Before any update (warm-up only): seed i's initial learner state, and the transitions its two envs
    collected with its warm-up actions, are bit for bit those of a single run with seed 7 + i."""
    cfg = tiny_sac_config(learning_starts=100, buffer_size=128)
    run = RunConfig(env_id="Pendulum-v1", n_timesteps=40, n_envs=2, eval_freq=-1, verbose=0, seed=7)
    group = train_seeds(run, ALGORITHMS["sac"], cfg, [SeedOutput(NO_LOG) for _ in range(3)])
    assert int(group.buffer_state.size[0]) == 40 and group.env_steps == 40
    for index in range(3):
        single = train(RunConfig(**{**vars(run), "seed": 7 + index}), ALGORITHMS["sac"], cfg, NO_LOG)
        seed_state = jax.tree.map(lambda x, i=index: x[i], group.state)
        seed_buffer = jax.tree.map(lambda x, i=index: x[i], group.buffer_state)
        for ours, theirs in zip(leaves(seed_state), leaves(single.state), strict=True):
            np.testing.assert_array_equal(ours, theirs)
        for ours, theirs in zip(leaves(seed_buffer), leaves(single.buffer_state), strict=True):
            np.testing.assert_array_equal(ours, theirs)
    first, second = (np.asarray(group.buffer_state.rows[i, :40]) for i in (0, 1))
    assert not np.array_equal(first, second)  # the seeds really differ


def outputs(tmp_path, n_seeds, **settings):
    def seed_output(index):
        run_dir = tmp_path / f"seed{index}"
        run_dir.mkdir()
        description = describe_run("tests.envs:SeedBlowUp-v0", seed=index)
        return SeedOutput(
            make_logger=lambda names, path=run_dir / "progress.csv": CSVLogger(path, names),
            run_dir=run_dir,
            checkpoints=CheckpointSettings(run_dir=run_dir, model_name="final", description=description, **settings),
        )

    return [seed_output(index) for index in range(n_seeds)]


def test_a_diverging_seed_is_frozen_marked_failed_and_the_others_train_on(tmp_path, capsys):
    """C12 for one seed of three: seed 1's env returns 1e38 from its 300th step, so its critic overflows.
    That seed writes the checkpoint of its last finite state, failed.txt and a train/diverged row, and
    stays exactly at that state; seeds 0 and 2 train to the end, evaluate and write their final models."""
    cfg = tiny_sac_config(learning_starts=100, buffer_size=2000)
    run = RunConfig(
        env_id="tests.envs:SeedBlowUp-v0", n_timesteps=1000, eval_freq=500, eval_episodes=1, log_interval=1, seed=0
    )
    result = train_seeds(run, ALGORITHMS["sac"], cfg, outputs(tmp_path, 3))
    assert list(result.failed) == [1] and "training diverged at env step 3" in result.failed[1]
    assert "Seed 1 diverged and is frozen" in capsys.readouterr().err
    frozen = tmp_path / "seed1"
    (checkpoint,) = frozen.glob("rl_model_*_steps.zip")
    assert str(checkpoint) in (frozen / FAILED_FILE).read_text()
    saved = read_checkpoint(checkpoint)
    assert saved.manifest.divergence.learner_state_from_env_steps < saved.manifest.divergence.detected_at_env_steps
    restored = state_from_bytes(jax.tree.map(lambda x: x[1], result.state), saved.state_bytes)
    for ours, theirs in zip(leaves(jax.tree.map(lambda x: x[1], result.state)), leaves(restored), strict=True):
        np.testing.assert_array_equal(ours, theirs)  # frozen: not one update since its last finite state
    rows = list(csv.DictReader((frozen / "progress.csv").open()))
    assert rows[-1]["train/diverged"] == "1.0" and not (frozen / "final.zip").exists()
    for index in (0, 2):
        folder = tmp_path / f"seed{index}"
        assert (folder / "final.zip").is_file() and not (folder / FAILED_FILE).exists()
        assert read_checkpoint(folder / "final.zip").manifest.counters.env_steps == 1000
        assert np.load(folder / "evaluations.npz")["timesteps"].tolist() == [500, 1000]
        assert all(row["train/diverged"] == "" for row in csv.DictReader((folder / "progress.csv").open()))
    assert result.env_steps == 1000


# -- train.py --n-seeds ------------------------------------------------------------------------------

SEEDS_TINY = [
    "--algo",
    "sac",
    "--seed",
    "0",
    "--n-seeds",
    "3",
    "-params",
    *TINY_LEARNER,
]


ENV_FOLDER = "tests.envs_SeedBlowUp-v0"


class DivergingGroup(NamedTuple):
    """One train.py run of three seeds whose seed 1 diverges (tests.envs:SeedBlowUp-v0), for the tests below."""

    proc: subprocess.CompletedProcess[str]
    root: Path  # -f is root/logs, -tb root/tb, W&B's offline runs under root/wandb
    folders: list[Path]  # each seed's run folder
    args: list[dict]  # each seed's args.yml
    wandb_runs: dict[int, dict]  # by seed


@pytest.fixture(scope="module")
def diverging_group(tmp_path_factory) -> DivergingGroup:
    """Issue 16 items 3, 4 and 6 through train.py: three seeds with W&B (offline), TensorBoard, evaluations,
    periodic checkpoints and a log row per episode; seed 1's env blows up mid-run."""
    root = tmp_path_factory.mktemp("diverging_group")
    argv = [*SEEDS_TINY, "--env", "tests.envs:SeedBlowUp-v0", "-n", "1000", "--eval-freq", "200"]
    argv += ["--eval-episodes", "2", "--save-freq", "500", "--log-interval", "1", "-tb", str(root / "tb"), "--track"]
    proc = subprocess.run(
        [sys.executable, "train.py", "-f", str(root / "logs"), *argv],
        cwd=REPO_ROOT,
        env=isolated_env(root, WANDB_MODE="offline"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    folders = [root / "logs" / "sac" / f"tests.envs_SeedBlowUp-v0_{n}" for n in (1, 2, 3)]
    assert all((folder / ENV_FOLDER / "args.yml").is_file() for folder in folders), proc.stderr[-3000:]
    args = [yaml.safe_load((folder / ENV_FOLDER / "args.yml").read_text()) for folder in folders]
    runs = {wandb_run(path)["config"]["seed"]: wandb_run(path) for path in (root / "wandb").glob("offline-run-*")}
    return DivergingGroup(proc, root, folders, args, runs)


def test_a_diverged_seed_is_frozen_and_named_and_the_run_exits_1(diverging_group):
    """Seed 1 is frozen when its learner diverges: the run goes on with two seeds, then exits 1 naming it."""
    proc, folders = diverging_group.proc, diverging_group.folders
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"1 of 3 seeds diverged and were frozen:\n  seed 1 ({folders[1]}): training diverged" in proc.stderr
    evals = [line for line in proc.stdout.splitlines() if line.startswith("Eval")]
    assert evals[0].startswith("Eval num_timesteps=200, episode_reward over 3 seeds: mean ")  # before seed 1 diverges
    assert evals[-1].startswith("Eval num_timesteps=1000, episode_reward over 2 seeds: mean ")


def test_each_seed_has_a_single_runs_folder_with_its_seed_and_the_group(diverging_group):
    """args.yml holds each folder's seed and one group; config.yml is the same; command.txt retrains the
    folder's seed alone (issue 32 item 14); a healthy seed's folder holds what a single run's does."""
    folders, args = diverging_group.folders, diverging_group.args
    assert [a["seed"] for a in args] == [0, 1, 2] and len({a["group"] for a in args}) == 1
    assert all(a["n_seeds"] == 3 for a in args)
    assert len({(folder / ENV_FOLDER / "config.yml").read_text() for folder in folders}) == 1
    assert (folders[0] / ENV_FOLDER / "command.txt").read_text().endswith(" --seed 0 --n-seeds 1\n")
    for index in (0, 2):
        assert {path.name for path in folders[index].iterdir()} == {
            ENV_FOLDER,  # config.yml, args.yml, command.txt
            f"{ENV_FOLDER}.zip",
            "best_model.zip",
            "rl_model_500_steps.zip",
            "rl_model_1000_steps.zip",
            "evaluations.npz",
            "progress.csv",
            "0.monitor.csv",
        }
        assert np.load(folders[index] / "evaluations.npz")["results"].shape == (5, 2)
        assert (diverging_group.root / "tb" / ENV_FOLDER / f"sac_{index + 1}").is_dir()


def test_each_seeds_final_model_names_its_seed_and_the_groups_folders(diverging_group):
    folders = diverging_group.folders
    for index in (0, 2):
        manifest = read_checkpoint(folders[index] / f"{ENV_FOLDER}.zip").manifest
        assert manifest.run.seed == index and manifest.run.group.index == index
        assert list(manifest.run.group.run_dirs) == [path.name for path in folders]


def test_the_diverged_seed_leaves_failed_in_its_folder_and_no_final_model(diverging_group):
    folder = diverging_group.folders[1]
    assert (folder / FAILED_FILE).is_file() and not (folder / f"{ENV_FOLDER}.zip").exists()
    assert list(csv.DictReader((folder / "progress.csv").open()))[-1]["train/diverged"] == "1.0"


def test_three_grouped_w_and_b_runs_and_the_diverged_one_is_marked_failed(diverging_group):
    runs = diverging_group.wandb_runs
    assert sorted(runs) == [0, 1, 2] and {run["group"] for run in runs.values()} == {diverging_group.args[0]["group"]}
    for index in (0, 2):
        assert runs[index]["exit_code"] == 0 and "failed" not in runs[index]["summary"]
    assert runs[1]["exit_code"] == 1 and runs[1]["summary"]["failed"].startswith("training diverged")
    assert any(row.get("train/diverged") == 1.0 for row in runs[1]["history"])


def test_enjoy_reads_a_seeds_folder_as_a_single_runs(diverging_group, capsys):
    """enjoy.py finds seed 2's best model by its run number, as a single run's."""
    logs, folder = diverging_group.root / "logs", diverging_group.folders[2]
    play = ["--algo", "sac", "--env", "tests.envs:SeedBlowUp-v0", "-f", str(logs), "--exp-id", "3"]
    assert enjoy([*play, "--load-best", "-n", "50", "--no-render"]) == 0
    assert f"Loaded {folder / 'best_model.zip'}" in capsys.readouterr().out


def test_sigterm_stops_every_seed_and_minus_i_on_any_one_resumes_the_group_bit_identically(tmp_path):
    """Item 5, C4 for three seeds: SIGTERM writes each seed's checkpoint (with its buffer) and exits 75;
    -i on seed 2's resumes all three, and each ends bit for bit where an uninterrupted three-seed run ends.
    --n-seeds 1 resumes one seed alone, as a single run."""
    argv = [*SEEDS_TINY, "--env", "Pendulum-v1", "-n", "1000", "--eval-freq", "250", "--eval-episodes", "1"]
    log = tmp_path / "stopped.log"
    with log.open("w") as out:
        stopped = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "a"), *argv],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_for(log, lambda: "Eval num_timesteps=250" in log.read_text() or stopped.poll() is not None)
        # Started once the first run has compiled: it loads the updates from the session's compilation cache.
        uninterrupted = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "b"), *argv, "--verbose", "0"], cwd=REPO_ROOT
        )
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-2000:]
    checkpoints = [next(run_dir(tmp_path / "a", "sac", n).glob("rl_model_*_steps.zip")) for n in (1, 2, 3)]
    assert len({path.name for path in checkpoints}) == 1 and f"-i {checkpoints[0]}" in log.read_text()
    assert all(read_checkpoint(path).manifest.replay_buffer for path in checkpoints)
    resume = ["--algo", "sac", "--env", "Pendulum-v1", "--eval-freq", "250", "--eval-episodes", "1", "--verbose", "0"]
    resumes = [  # the group, and seed 1 alone, at the same time (they read the checkpoint, write apart)
        subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / folder), *resume, "-i", str(checkpoints[1]), *extra],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder, extra in (("a", []), ("alone", ["--n-seeds", "1"]))
    ]
    for process in resumes:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
    assert uninterrupted.wait(timeout=600) == 0
    for n in (1, 2, 3):
        resumed, reference = run_dir(tmp_path / "a", "sac", 3 + n), run_dir(tmp_path / "b", "sac", n)
        assert state_hash(resumed / "Pendulum-v1.zip") == state_hash(reference / "Pendulum-v1.zip"), n
        np.testing.assert_array_equal(
            np.load(resumed / "evaluations.npz")["results"], np.load(reference / "evaluations.npz")["results"]
        )
    single = read_checkpoint(run_dir(tmp_path / "alone", "sac", 1) / "Pendulum-v1.zip").manifest
    assert single.run.seed == 1 and single.run.group is None and single.counters.env_steps == 1000


def test_k_run_folders_are_claimed_in_one_pass_after_the_highest_existing_one(tmp_path):
    """Issue 32 item 7: each claim listed the whole algo folder, so K claims cost O(K^2) (4,000 folders took
    about 10 s here, 100,000 hours). Now the folder is listed once: 4,000 consecutive folders in well under
    a second, after the ones already there."""
    algo_dir = tmp_path / "logs" / "sac"
    algo_dir.mkdir(parents=True)
    (algo_dir / "Pendulum-v1_7").mkdir()
    start = time.monotonic()
    run_dirs = claim_run_dirs(tmp_path / "logs", "sac", "Pendulum-v1", False, 4000)
    assert time.monotonic() - start < 3.0
    assert [path.name for path in run_dirs] == [f"Pendulum-v1_{n}" for n in range(8, 4008)]
    assert all(path.is_dir() for path in run_dirs)


def limited_open_files(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


def test_n_seeds_is_bounded_by_the_open_file_limit_before_any_folder(tmp_path):
    """Issue 32 item 7: every seed keeps its progress.csv, a TensorBoard file and a Monitor file per env open
    for the whole run, so K is bounded by the open-file limit: past it, one line naming the limit and the
    number of seeds that fit, exit 2, no folder."""
    done = subprocess.run(
        [sys.executable, "train.py", "-f", str(tmp_path / "logs"), *SEEDS_TINY[:4], "--n-seeds", "100", "-n", "50"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        preexec_fn=limited_open_files(400),  # 100 seeds x 3 files + 256 in reserve > 400
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr == (
        "error: --n-seeds 100: each seed keeps 3 files open for the whole run (progress.csv, a TensorBoard file, "
        "its envs' Monitor files), so 100 seeds need 556 file descriptors, and this process may open 400 "
        "(ulimit -n); train at most 48 seeds per process (more processes, or a sweep), or raise the limit\n"
    )
    assert not (tmp_path / "logs").exists()


def test_sigterm_while_the_run_folders_are_claimed_removes_them_all(tmp_path):
    """Issue 32 item 7: SIGTERM while K run folders are being claimed and filled (config.yml, args.yml,
    command.txt) left thousands of them behind. Signals are handled from the first moment: the start
    removes every folder it claimed, and the parents it created, and exits 143 (128 + SIGTERM) in one line."""
    n_seeds = min(2000, (resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 256) // 3)
    logs = tmp_path / "logs"
    argv = [*SEEDS_TINY[:4], "--n-seeds", str(n_seeds), "-n", "50", "-params", *TINY_LEARNER]
    process = subprocess.Popen(
        [sys.executable, "train.py", "-f", str(logs), *argv],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (logs / "sac").is_dir() or not any((logs / "sac").iterdir()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.002)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert err.splitlines()[-1] == "stopped by SIGTERM before training started; no run folder left behind"
    assert not logs.exists()


def test_command_txt_of_one_seed_retrains_that_seed_alone_and_args_yml_stores_dicts(tmp_path):
    """Issue 32 item 14: command.txt of one seed of a group retrained the whole group; it now reruns that
    seed alone. args.yml stores -params and --env-kwargs as RL Zoo does (dicts, or null when not given)."""
    logs = tmp_path / "logs"
    argv = [*SEEDS_TINY[:4], "--n-seeds", "2", "-n", "150", "--eval-freq", "-1", "--verbose", "0"]
    argv += ["--env", "Pendulum-v1", "--env-kwargs", "g:9.81", "-params", *TINY_LEARNER]
    done = subprocess.run([sys.executable, "train.py", "-f", str(logs), *argv], cwd=REPO_ROOT, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    params = logs / "sac" / "Pendulum-v1_2" / "Pendulum-v1"
    args = yaml.safe_load((params / "args.yml").read_text())
    assert args["env_kwargs"] == {"g": 9.81} and args["eval_env_kwargs"] is None
    assert args["hyperparams"] == {
        "learning_starts": 100,
        "batch_size": 8,
        "buffer_size": 1000,
        "policy_kwargs": {"net_arch": [16]},
    }
    command = shlex.split((params / "command.txt").read_text())
    assert command[:2] == ["python", "train.py"] and command[-4:] == ["--seed", "1", "--n-seeds", "1"]
    assert command.count("--seed") == 1 and command.count("--n-seeds") == 1  # the group's flags replaced
    rerun = subprocess.run([sys.executable, *command[1:]], cwd=REPO_ROOT, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    alone = yaml.safe_load((logs / "sac" / "Pendulum-v1_3" / "Pendulum-v1" / "args.yml").read_text())
    assert alone["seed"] == 1 and "group" not in alone and alone["n_seeds"] == 1
    single = subprocess.run(
        [sys.executable, "train.py", "-f", str(tmp_path / "single"), "-n", "50", "--eval-freq", "-1", "--verbose", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert single.returncode == 0, single.stderr[-2000:]
    plain = yaml.safe_load(next((tmp_path / "single").rglob("args.yml")).read_text())
    assert plain["hyperparams"] is None and plain["env_kwargs"] is None and plain["eval_env_kwargs"] is None


def test_the_soft_open_file_limit_is_raised_when_the_hard_one_allows():
    """Issue 32 item 7: below the hard limit, K seeds are not refused: the soft limit (often 1024) is raised."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1000:
        pytest.skip(f"hard open-file limit {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (400, hard))
    try:
        check_open_files(100, 1, "dummy")  # 100 x 3 + 256
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 556
        check_open_files(100, 1, "subproc")  # 100 x (2 + 3) + 256
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 756
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_vmapped_ppo_seeds_train_as_separate_runs_with_those_seeds():
    """PPO under --n-seeds (one vmapped update per rollout for all seeds): after three rollouts of 16 steps x
    2 envs and their updates, each seed's learner state is a single run's with that seed (to float32
    rounding: vmapped matrix products may round differently)."""
    keys = {"n_steps": 16, "batch_size": 16, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}}
    cfg = ALGORITHMS["ppo"].build_config(keys, 2, "test")
    run = RunConfig(env_id="Pendulum-v1", n_timesteps=96, n_envs=2, eval_freq=-1, verbose=0, seed=7)
    group = train_seeds(run, ALGORITHMS["ppo"], cfg, [SeedOutput(NO_LOG) for _ in range(2)])
    assert np.asarray(group.state.n_updates).tolist() == [6, 6]  # 3 rollouts x 2 epochs, each seed
    singles = [
        train(RunConfig(**{**vars(run), "seed": 7 + index}), ALGORITHMS["ppo"], cfg, NO_LOG) for index in range(2)
    ]
    for index, single in enumerate(singles):
        seed_state = jax.tree.map(lambda x, i=index: x[i], group.state)
        for ours, theirs in zip(leaves(seed_state), leaves(single.state), strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    first, second = (leaves(single.state.policy.params)[0] for single in singles)
    assert not np.allclose(first, second)  # the seeds really differ
