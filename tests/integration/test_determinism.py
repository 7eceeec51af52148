"""Same seed, separate processes, CPU: bit-identical parameters and returns; other seeds differ (I1, I2, I4).
A repeated run in one process reuses the first run's compiled programs and ends bit-identical to it."""

import hashlib
import subprocess
import sys
import zipfile

import jax
import numpy as np
import pytest
from jax import monitoring

from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.loggers.base import MultiLogger
from rlbench.loop import compiled
from rlbench.types import EnvSpec
from tests.conftest import REPO_ROOT, TINY_LEARNER, tiny_sac_config
from tests.loop_runs import train
from tests.variants import slow_variant

ARGS = ["--env", "Pendulum-v1", "-n", "400", "--eval-freq", "200", "--eval-episodes", "2", "--verbose", "0"]
ARGS += ["-params", *TINY_LEARNER]
# DroQ's preset with its dropout critic (masks from lax.rng_bit_generator), 2 gradient steps per env step.
DROQ_EXTRA = ["gradient_steps:2", "policy_delay:2"]


def start_training(log_folder, algo, seed):
    extra = DROQ_EXTRA if algo == "droq" else []
    return subprocess.Popen(
        [sys.executable, "train.py", "--algo", algo, *ARGS, *extra, "--seed", str(seed), "-f", str(log_folder)],
        cwd=REPO_ROOT,
    )


def finished_run(log_folder, algo, process):
    assert process.wait(timeout=600) == 0
    run_dir = next((log_folder / algo).glob("Pendulum-v1_*"))
    model = hashlib.sha256(zipfile.ZipFile(run_dir / "Pendulum-v1.zip").read("state.msgpack")).hexdigest()
    return model, np.load(run_dir / "evaluations.npz")["results"]


@pytest.mark.parametrize("algo", ["sac", slow_variant("droq")])
def test_same_seed_is_bit_identical_across_processes_and_other_seeds_differ(tmp_path, algo):
    # Run a first, alone; then b (a's seed) and c (another seed) at the same time: b must end exactly as a,
    # however its neighbour shares the machine. (b and c load what a compiled from the session's cache: one
    # compilation instead of three.)
    model_a, returns_a = finished_run(tmp_path / "a", algo, start_training(tmp_path / "a", algo, 3))
    runs = {name: start_training(tmp_path / name, algo, seed) for name, seed in (("b", 3), ("c", 4))}
    (model_b, returns_b), (model_c, returns_c) = (
        finished_run(tmp_path / name, algo, process) for name, process in runs.items()
    )
    assert model_a == model_b
    np.testing.assert_array_equal(returns_a, returns_b)
    assert model_a != model_c
    assert not np.array_equal(returns_a, returns_c)


def test_a_second_run_in_the_process_reuses_the_compiled_programs_and_ends_bit_identical():
    """compiled.entry_points: a run with the algorithm, config, env spec and seed count of a recent run in the
    same process calls that run's programs (nothing is traced again) and ends exactly as the first; another
    config gets programs of its own, and only the last few are kept."""
    traced = []
    monitoring.register_event_duration_secs_listener(
        lambda event, *_, **kw: traced.append(kw.get("fun_name")) if event.endswith("jaxpr_trace_duration") else None
    )

    def trained_leaves(cfg, seed=0):
        run = RunConfig(env_id="Pendulum-v1", n_timesteps=120, seed=seed, eval_freq=-1, verbose=0)
        state = train(run, ALGORITHMS["sac"], cfg, lambda names: MultiLogger([])).state
        keys_as_data = lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x  # noqa: E731
        return [np.asarray(keys_as_data(leaf)) for leaf in jax.tree.leaves(state)]

    def programs(cfg):
        return compiled.entry_points(ALGORITHMS["sac"], cfg, EnvSpec(obs_dim=3, action_dim=1), 1)

    cfg = tiny_sac_config(learning_starts=50)
    first = trained_leaves(cfg)
    first_programs = programs(cfg)
    traced.clear()
    second = trained_leaves(cfg)
    assert traced == []
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, trained_leaves(cfg, seed=1), strict=True))
    others = [tiny_sac_config(learning_starts=50, gamma=0.9 + i / 100) for i in range(compiled.N_RECENT_ENTRY_POINTS)]
    assert all(programs(other) is not first_programs for other in others)
    assert programs(cfg) is not first_programs  # the oldest was dropped
