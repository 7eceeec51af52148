"""store/manifest.py: the manifest as a typed record. A format-3 manifest.json written before the record existed
(tests/data/manifest_format3.json: a 2-seed SAC Pendulum run's final model, at f6f57c5) reads into it and
writes back key for key; a forged value is refused by name before the record exists."""

import copy
import dataclasses
import json
import re
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import tests.envs  # noqa: F401  (registers the test envs)
from rlbench.config.registry import ALGORITHMS
from rlbench.run.probe import describe_space
from rlbench.store.checkpoint import FORMAT_VERSION, read_checkpoint, write_checkpoint
from rlbench.store.expectations import policy_expectations, resume_expectations
from rlbench.store.manifest import Divergence, Group, Manifest, RunDescription, Spaces, read_manifest
from rlbench.store.schema import ManifestError, UpTo
from tests.conftest import REPO_ROOT

FORMAT3 = Path(REPO_ROOT) / "tests" / "data" / "manifest_format3.json"
ARCHIVE_KEYS = ("format_version", "members", "sizes")  # the archive's own, rlbench.store.checkpoint's


def format3() -> dict:
    return json.loads(FORMAT3.read_text())


def describe_run(env_id: str, algo: str = "sac", config=None, **changes) -> RunDescription:
    """The run description launch.py writes for a one-seed run of `env_id` (its spaces from the env itself),
    for tests that train through the loop without train.py; `config` gives the saved hyperparameters."""
    env = gym.make(env_id)
    spaces = {"observation": describe_space(env.observation_space), "action": describe_space(env.action_space)}
    env.close()
    hyperparams = {"buffer_size": 1} if config is None else ALGORITHMS[algo].config_to_hyperparams(config)
    fields = dict(algo=algo, env_id=env_id, seed=0, n_timesteps=1, n_envs=1, spaces=Spaces.from_json(spaces))
    return RunDescription(**{**fields, "hyperparams": hyperparams, **changes})


def example_manifest(**changes) -> Manifest:
    """A complete manifest (the format-3 file's), with `changes` to its top-level fields."""
    return dataclasses.replace(read_manifest(format3()), **changes)


def test_a_format_3_manifest_reads_into_named_fields():
    manifest = read_manifest(format3())
    assert FORMAT_VERSION == 3 and format3()["format_version"] == 3
    run = manifest.run
    assert (run.algo, run.env_id, run.seed, run.n_envs, run.n_timesteps) == ("sac", "Pendulum-v1", 3, 1, 300)
    assert run.group == Group("sac_Pendulum-v1_seeds3-4_344bcb45", 0, ("Pendulum-v1_1", "Pendulum-v1_2"))
    assert run.spaces.spec == (3, 1, 0, ()) and run.spaces.action.low == (-2.0,)
    assert run.spaces.observation.high[2] == 8.0
    assert run.hyperparams["buffer_size"] == 1000 and run.resumed_from is None and run.wandb_run_id is None
    assert (manifest.kind, manifest.replay_buffer, manifest.divergence) == ("final", False, None)
    assert (manifest.counters.env_steps, manifest.counters.gradient_steps, manifest.counters.episodes) == (300, 200, 1)
    assert manifest.host.pending_count == 0 and manifest.host.update_start == 100
    assert manifest.host.episode_starts[0]["rng"]["bit_generator"] == "PCG64"
    assert manifest.versions["rlbench"] == "0.1.0"


def written(tmp_path, manifest: Manifest) -> dict:
    """manifest.json as write_checkpoint writes it for `manifest`, less the archive's own keys."""
    path = tmp_path / "written.zip"
    write_checkpoint(path, manifest, b"state", {"host/obs": np.zeros((1, 3), np.float32)})
    on_disk = json.loads(zipfile.ZipFile(path).read("manifest.json"))
    assert on_disk["format_version"] == FORMAT_VERSION and set(on_disk["members"]) == {"state.msgpack", "host/obs.npy"}
    return {key: value for key, value in on_disk.items() if key not in ARCHIVE_KEYS}


def test_a_format_3_manifest_is_written_back_key_for_key(tmp_path):
    """The JSON on disk stays what format 3 has always been: every key, `group` only in a run of several seeds."""
    saved = {key: value for key, value in format3().items() if key not in ARCHIVE_KEYS}
    assert written(tmp_path, read_manifest(format3())) == saved
    one_seed = {key: value for key, value in format3().items() if key != "group"}
    assert "group" not in written(tmp_path, read_manifest(one_seed))


def test_write_then_read_gives_the_same_record(tmp_path):
    manifest = example_manifest(kind="failure", replay_buffer=False, divergence=Divergence(320, 280))
    path = tmp_path / "rl_model_320_steps.zip"
    write_checkpoint(path, manifest, b"state", {"host/obs": np.zeros((1, 3), np.float32)})
    assert read_checkpoint(path).manifest == manifest
    assert written(tmp_path, manifest)["divergence"] == {
        "detected_at_env_steps": 320,
        "learner_state_from_env_steps": 280,
    }


def forged(path, value):
    def edit(manifest):
        *parents, last = path
        for key in parents:
            manifest = manifest[key]
        if value is KeyError:
            del manifest[last]
        else:
            manifest[last] = value
        return manifest

    changed = copy.deepcopy(format3())
    edit(changed)
    return changed


@pytest.mark.parametrize(
    "path,value,reason",
    [
        (("kind",), KeyError, "the manifest has no kind"),
        (("n_timesteps",), "300", "manifest n_timesteps: expected a non-negative integer, got '300'"),
        (("resumed_from",), 5, "manifest resumed_from: expected a string, got 5"),
        (("group", "run_dirs"), ["../x"], "manifest group.run_dirs: '../x' is not a run folder name"),
        (("group", "index"), 2, "manifest group.index: 2 is not below the group's 2 seeds"),
        (("divergence",), {"detected_at_env_steps": -1}, "manifest divergence.detected_at_env_steps: expected a"),
        (("versions",), {"jax": 10}, "manifest versions['jax']: expected a string, got 10"),
        (("spaces", "action", "low"), [], "manifest spaces.action: shape [1] describes 1 values, but its low"),
        (("host", "warmup_rng", "bit_generator"), "MT19937", "manifest host.warmup_rng: not a PCG64 generator"),
    ],
)
def test_a_forged_field_is_refused_by_name(path, value, reason):
    with pytest.raises(ManifestError, match=f"^{re.escape(reason)}"):
        read_manifest(forged(path, value))


def test_the_members_a_resume_and_a_policy_require_follow_the_record():
    manifest = example_manifest(replay_buffer=True)
    resume = resume_expectations(manifest)
    assert resume.shapes["host/obs"] == (1, 3) and resume.shapes["host/episode_actions_0"] == (UpTo(300), 1)
    assert resume.shapes["host/finished_returns"] == (1,) and resume.shapes["host/pending_obs"] == (0, 3)
    assert resume.shapes["replay_buffer/rows"] == (UpTo(1000), 9)  # 2 * 3 observations + 1 action + 2
    assert resume.closed and not resume.allows("host/episode_actions_1")
    assert policy_expectations(manifest).shapes == {"host/obs": (1, 3)}


def test_a_format_3_checkpoints_metrics_are_read_under_sb3s_names():
    """The format-3 file was written when rlbench named the temperature metrics its own way (train/alpha,
    train/temperature_loss): a resume from it logs them under SB3's names, the columns of its new progress.csv."""
    from rlbench.store.host_state import HostState, PendingTransitions
    from rlbench.types import EnvSpec

    pending_shapes = ((0, 3), (0, 1), (0,), (0, 3), (0,))  # no transitions pending (pending_count 0)

    host = read_manifest(format3()).host
    arrays = {
        "obs": np.zeros((1, 3), np.float32),
        "act_key": np.zeros(2, np.uint32),
        "episode_returns": np.zeros(1),
        "episode_lengths": np.zeros(1, np.int64),
        "finished_returns": np.zeros(1),
        "finished_lengths": np.full(1, 200),
        **{f"pending_{n}": np.zeros(shape) for n, shape in zip(PendingTransitions.FIELDS, pending_shapes, strict=True)},
        **{f"eval_{name}": np.zeros((0,)) for name in ("timesteps", "results", "ep_lengths")},
        "episode_actions_0": np.zeros((0, 1)),
    }
    restored, _ = HostState.from_checkpoints([(host, arrays)], [3], EnvSpec(3, 1), capacity=1)
    assert "train/alpha" in host.metrics and "train/temperature_loss" in host.metrics  # the old names, as saved
    assert float(restored.metrics["train/ent_coef"][0]) == host.metrics["train/alpha"] == 0.8191571831703186
    assert float(restored.metrics["train/ent_coef_loss"][0]) == host.metrics["train/temperature_loss"]
    assert not {"train/alpha", "train/temperature_loss"} & set(restored.metrics)
