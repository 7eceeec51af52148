"""Several seeds in one run (issue 16), in-process through runner.train_seeds: each seed starts as a single
run with that seed would, and a seed that diverges is frozen while the others train on."""

import csv

import jax
import numpy as np

from rlbench.checkpoint import read_checkpoint, state_from_bytes
from rlbench.config import RunConfig
from rlbench.loggers.csv import CSVLogger
from rlbench.registry import ALGORITHMS
from rlbench.runner import FAILED_FILE, CheckpointSettings, SeedOutput, train, train_seeds
from tests.conftest import tiny_sac_config
from tests.integration.test_env_semantics import NO_LOG


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
        manifest = {"algo": "sac", "env_id": "tests.envs:SeedBlowUp-v0", "seed": index, "hyperparams": {}}
        return SeedOutput(
            make_logger=lambda names, path=run_dir / "progress.csv": CSVLogger(path, names),
            run_dir=run_dir,
            checkpoints=CheckpointSettings(run_dir=run_dir, model_name="final", manifest=manifest, **settings),
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
    assert (
        saved.manifest["divergence"]["learner_state_from_env_steps"]
        < saved.manifest["divergence"]["detected_at_env_steps"]
    )
    restored = state_from_bytes(jax.tree.map(lambda x: x[1], result.state), saved.state_bytes)
    for ours, theirs in zip(leaves(jax.tree.map(lambda x: x[1], result.state)), leaves(restored), strict=True):
        np.testing.assert_array_equal(ours, theirs)  # frozen: not one update since its last finite state
    rows = list(csv.DictReader((frozen / "progress.csv").open()))
    assert rows[-1]["train/diverged"] == "1.0" and not (frozen / "final.zip").exists()
    for index in (0, 2):
        folder = tmp_path / f"seed{index}"
        assert (folder / "final.zip").is_file() and not (folder / FAILED_FILE).exists()
        assert read_checkpoint(folder / "final.zip").manifest["counters"]["env_steps"] == 1000
        assert np.load(folder / "evaluations.npz")["timesteps"].tolist() == [500, 1000]
        assert all(row["train/diverged"] == "" for row in csv.DictReader((folder / "progress.csv").open()))
    assert result.env_steps == 1000
