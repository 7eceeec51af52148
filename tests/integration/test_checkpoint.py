"""The checkpoint file: round trip (B1), corrupt and torn files (B5, B9), crash and disk-full during a
save (C1, C3), retention."""

import errno
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

from rlbench.algos.soft import acting
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.files import remove_stale_temporaries
from rlbench.loop.saving import CheckpointSettings
from rlbench.run.policy import load_policy
from rlbench.store.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    newest_valid_checkpoint,
    prune_periodic_checkpoints,
    read_checkpoint,
    write_checkpoint,
)
from rlbench.store.learner_state import state_from_bytes
from rlbench.store.manifest import Counters
from tests.conftest import REPO_ROOT, tiny_sac_config
from tests.integration.test_env_semantics import NO_LOG
from tests.loop_runs import train
from tests.unit.test_manifest import describe_run, example_manifest
from tests.variants import slow_variant


def small_checkpoint(folder: Path, name: str, value: float = 1.0) -> Path:
    path = folder / name
    write_checkpoint(
        path,
        example_manifest(kind="test"),
        b"state-bytes",
        {"host/obs": np.full((2, 3), value, np.float32), "replay_buffer/rows": np.arange(12.0)},
    )
    return path


def trained(tmp_path, algo="sac", **overrides):
    cfg = (tiny_sac_config if algo == "sac" else crossq_config)(learning_starts=50, buffer_size=500, **overrides)
    run = RunConfig(env_id="Pendulum-v1", n_timesteps=120, eval_freq=-1, verbose=0, seed=5)
    settings = CheckpointSettings(
        run_dir=tmp_path,
        model_name="final",
        save_freq=60,
        save_replay_buffer=True,
        description=describe_run("Pendulum-v1", algo, cfg, seed=5, n_timesteps=120),
    )
    return cfg, train(run, ALGORITHMS[algo], cfg, NO_LOG, checkpoints=settings)


def crossq_config(**overrides):
    from rlbench.algos.crossq.config import CrossQConfig
    from rlbench.networks.mlp import NetworkConfig

    bn = NetworkConfig(hidden=(8, 8), batch_norm=True, renorm_warmup_steps=20)
    return CrossQConfig(
        batch_size=8,
        actor=bn,
        critic=NetworkConfig(hidden=(16, 16), batch_norm=True, renorm_warmup_steps=20),
        policy_delay=3,
        adam_b1=0.5,
        **overrides,
    )


@pytest.mark.parametrize("algo", ["sac", slow_variant("crossq")])
def test_round_trip_restores_every_leaf_actions_and_counters(tmp_path, algo):
    """B1: parameters, optimizer states, targets, alpha, batch statistics and key are array_equal."""
    cfg, result = trained(tmp_path, algo)
    checkpoint = read_checkpoint(tmp_path / "final.zip")
    from rlbench.types import EnvSpec

    learner = ALGORITHMS[algo].make_learner(cfg, EnvSpec(3, 1))
    # A template state to restore into, jitted as the runner jits it: a compilation cache hit, where calling
    # init_fn eagerly would compile each of its operations on its own (seconds).
    restored = state_from_bytes(jax.jit(learner.init_fn)(jax.random.key(1)), checkpoint.state_bytes)
    saved_leaves = jax.tree_util.tree_leaves(result.state.replace(key=jax.random.key_data(result.state.key)))
    restored_leaves = jax.tree_util.tree_leaves(restored.replace(key=jax.random.key_data(restored.key)))
    assert len(saved_leaves) == len(restored_leaves) > 10
    for a, b in zip(saved_leaves, restored_leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    if algo == "crossq":  # the BatchRenorm statistics and step counters came back too
        stats = jax.tree_util.tree_leaves(restored.critic.batch_stats)
        assert stats and any(np.any(np.asarray(leaf) != 0) for leaf in stats)
    assert checkpoint.manifest.counters == Counters(env_steps=120, gradient_steps=int(result.state.step), episodes=0)
    assert int(result.state.step) == 70  # gradient steps after learning_starts=50
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    act = jax.jit(acting.act_deterministic)
    np.testing.assert_array_equal(np.asarray(act(result.state, obs)), np.asarray(act(restored, obs)))
    # The checkpoint holds only .npy members, a msgpack state and JSON: no pickle anywhere (B9).
    with zipfile.ZipFile(tmp_path / "final.zip") as archive:
        for name in archive.namelist():
            data = archive.read(name)
            assert name.endswith((".npy", ".msgpack", ".json")), name
            if name.endswith(".npy"):
                assert b"pickle" not in data[:128] and data[:6] == b"\x93NUMPY"


def test_policy_rebuilt_from_the_manifest_alone_acts_like_the_trained_state(tmp_path):

    cfg = tiny_sac_config(learning_starts=50, buffer_size=500)
    run = RunConfig(env_id="Pendulum-v1", n_timesteps=100, eval_freq=-1, verbose=0)
    settings = CheckpointSettings(
        run_dir=tmp_path, model_name="m", description=describe_run("Pendulum-v1", "sac", cfg, n_timesteps=100)
    )
    result = train(run, ALGORITHMS["sac"], cfg, NO_LOG, checkpoints=settings)
    policy = load_policy(read_checkpoint(tmp_path / "m.zip"))
    obs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(policy(obs), np.asarray(jax.jit(acting.act_deterministic)(result.state, obs)))


def test_every_kind_of_broken_file_is_reported_with_path_reason_and_newest_valid(tmp_path):
    """B5: random bytes, empty file, directory, truncated archive, checksum mismatch, no manifest."""
    valid = small_checkpoint(tmp_path, "rl_model_100_steps.zip")
    whole = valid.read_bytes()
    cases = {
        "rl_model_200_steps.zip": (os.urandom(1000), "not a zip archive or truncated"),
        "rl_model_300_steps.zip": (b"", "empty file"),
        "rl_model_400_steps.zip": (whole[: len(whole) // 2], "not a zip archive or truncated"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "rl_model_500_steps.zip").mkdir()
    cases["rl_model_500_steps.zip"] = (None, "a directory")
    tampered = tmp_path / "rl_model_600_steps.zip"  # same manifest, other state bytes
    with zipfile.ZipFile(valid) as src, zipfile.ZipFile(tampered, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, b"other-bytes" if item.filename == "state.msgpack" else src.read(item))
    cases[tampered.name] = (None, "checksum mismatch in state.msgpack")
    no_manifest = tmp_path / "rl_model_700_steps.zip"
    with zipfile.ZipFile(valid) as src, zipfile.ZipFile(no_manifest, "w") as dst:
        for item in src.infolist():
            if item.filename != "manifest.json":
                dst.writestr(item, src.read(item))
    cases[no_manifest.name] = (None, "no manifest.json")
    for name, (_, reason) in cases.items():
        with pytest.raises(CheckpointError) as caught:
            read_checkpoint(tmp_path / name)
        message = str(caught.value)
        assert message.startswith(f"corrupt or incomplete checkpoint: {tmp_path / name} (")
        assert reason in message, (name, message)
        assert f"newest valid checkpoint: {valid}" in message
    assert newest_valid_checkpoint(tmp_path) == valid
    with pytest.raises(CheckpointError, match="no such file"):
        read_checkpoint(tmp_path / "missing.zip")


def test_other_format_version_is_refused_by_name(tmp_path):
    path = small_checkpoint(tmp_path, "old.zip")
    with zipfile.ZipFile(path) as src:
        older = FORMAT_VERSION - 1
        manifest = src.read("manifest.json").replace(
            f'"format_version": {FORMAT_VERSION}'.encode(), f'"format_version": {older}'.encode()
        )
        members = {item.filename: src.read(item) for item in src.infolist()}
    with zipfile.ZipFile(path, "w") as dst:
        for name, data in members.items():
            dst.writestr(name, manifest if name == "manifest.json" else data)
    with pytest.raises(CheckpointError, match=f"format version {older}, this rlbench reads version {FORMAT_VERSION}"):
        read_checkpoint(path)


KILL_MID_SAVE = """
import sys, time, zipfile
import numpy as np
from pathlib import Path
from rlbench.store.checkpoint import write_checkpoint
from tests.unit.test_manifest import example_manifest
folder = Path(sys.argv[1])
write_checkpoint(folder / "best_model.zip", example_manifest(kind="first"), b"first", {"host/obs": np.zeros(3)})
real_writestr = zipfile.ZipFile.writestr
def stall_before_manifest(self, name, data, *args, **kwargs):
    if name == "manifest.json":  # the members are in the temporary file; the manifest never comes
        print("stalled", flush=True)
        time.sleep(600)
    return real_writestr(self, name, data, *args, **kwargs)
zipfile.ZipFile.writestr = stall_before_manifest
write_checkpoint(folder / "best_model.zip", example_manifest(kind="second"), b"second" * 100000,
                 {"host/obs": np.ones(3), "replay_buffer/rows": np.ones((1000, 9))})
"""


def test_sigkill_during_a_save_leaves_the_previous_checkpoint_whole(tmp_path):
    """C1/C2: killed after the members, before the manifest: the old file is untouched; the temporary
    file is ignored by readers and removed by the next save in that folder."""
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_MID_SAVE, str(tmp_path)], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "stalled"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    temporaries = list(tmp_path.glob(".best_model.zip.*.tmp"))
    assert len(temporaries) == 1 and temporaries[0].stat().st_size > 500_000
    checkpoint = read_checkpoint(tmp_path / "best_model.zip")
    assert checkpoint.manifest.kind == "first" and checkpoint.state_bytes == b"first"
    small_checkpoint(tmp_path, "rl_model_10_steps.zip")
    assert not list(tmp_path.glob("*.tmp"))


def test_a_live_writer_s_temporary_file_is_left_alone_and_only_rlbench_s_are_removed(tmp_path):
    """Issue 44 item 8: `-i` cleans the folder it resumes from, where the run that wrote it may still be writing
    (another process): its temporary file is locked while it lives, and only a dead writer's is removed. A
    hidden .tmp file not named as rlbench names its temporaries stays too."""
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_MID_SAVE, str(tmp_path)], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "stalled"
        (tmp_path / ".notes.tmp").write_text("the user's")
        [temporary] = tmp_path.glob(".best_model.zip.*.tmp")
        assert remove_stale_temporaries(tmp_path) == [] and temporary.exists()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert remove_stale_temporaries(tmp_path) == [temporary] and not temporary.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == [".notes.tmp", "best_model.zip"]


def test_disk_full_during_a_save_raises_and_keeps_the_previous_file(tmp_path, monkeypatch):
    """C3: ENOSPC mid-write: OSError out, no file under the final name changed, no temporary left."""
    path = small_checkpoint(tmp_path, "best_model.zip", value=1.0)
    before = path.read_bytes()
    real_writestr = zipfile.ZipFile.writestr

    def disk_full(self, name, data, *args, **kwargs):
        if name.startswith("replay_buffer/"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writestr(self, name, data, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        small_checkpoint(tmp_path, "best_model.zip", value=2.0)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_model.zip"]


def test_keep_the_newest_k_periodic_checkpoints(tmp_path):
    for steps in (100, 200, 300, 1000):
        small_checkpoint(tmp_path, f"rl_model_{steps}_steps.zip")
    small_checkpoint(tmp_path, "best_model.zip")
    prune_periodic_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best_model.zip",
        "rl_model_1000_steps.zip",
        "rl_model_300_steps.zip",
    ]
    prune_periodic_checkpoints(tmp_path, keep=0)
    assert len(list(tmp_path.iterdir())) == 3
