"""What a checkpoint given to `-i` holds, beyond its shapes and dtypes (issue 44 items 2, 6 and 8): a forged value
(NaN, inf, a counter out of its range, an env state that does not fit, a W&B run id W&B refuses) is refused in
one line, exit 2, before any run folder exists, naming the member and what is wrong; an env state nested too
deeply is a corrupt checkpoint (exit 1) with a reason; and a checkpoint is never written holding NaN or inf."""

import hashlib
import io
import json
import shutil
import signal
import subprocess
import sys
import zipfile

import jax
import numpy as np
import pytest
from flax import serialization

from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.cli.train import main
from rlbench.config.entry import normalize_entry, split_entry
from rlbench.config.registry import ALGORITHMS
from rlbench.errors import DivergenceError
from rlbench.loop.divergence_guard import DivergenceGuard
from rlbench.loop.saving import CheckpointSettings, RunCheckpoints, new_host_state
from rlbench.store.checkpoint import read_checkpoint
from rlbench.store.learner_state import state_from_bytes
from rlbench.types import EnvSpec
from tests.conftest import REPO_ROOT, TINY_LEARNER
from tests.integration.test_checkpoint import KILL_MID_SAVE
from tests.integration.test_checkpoint_untrusted import forge, nested_msgpack, npy

TD3_OU = [
    "--algo", "td3", "--env", "Pendulum-v1", "--seed", "3", "--verbose", "0", "--eval-freq", "-1",
    "-params", *TINY_LEARNER, "noise_type:'ornstein-uhlenbeck'", "noise_std:0.5",
]  # fmt: skip
DEVICE = [
    "--algo", "sac", "--env", "gymnax:Pendulum-v1", "--seed", "3", "--verbose", "0", "--eval-freq", "-1",
    "--env-kwargs", "max_steps_in_episode:50",
    "-params", *TINY_LEARNER, "n_envs:2", "train_freq:4", "gradient_steps:2",
]  # fmt: skip


@pytest.fixture(scope="module")
def td3_model(tmp_path_factory):
    """TD3 with Ornstein-Uhlenbeck noise after 300 steps, with its replay buffer (300 rows of 1000)."""
    folder = tmp_path_factory.mktemp("td3")
    assert main(["-f", str(folder), *TD3_OU, "-n", "300", "--save-replay-buffer"]) == 0
    return folder / "td3" / "Pendulum-v1_1" / "Pendulum-v1.zip"


@pytest.fixture(scope="module")
def device_model(tmp_path_factory):
    """A device-loop run's checkpoint at 130 env steps: each env 15 steps into its third 50-step episode."""
    pytest.importorskip("gymnax")
    folder = tmp_path_factory.mktemp("device")
    assert main(["-f", str(folder), *DEVICE, "-n", "130", "--save-replay-buffer"]) == 0
    return folder / "sac" / "gymnax_Pendulum-v1_1" / "gymnax_Pendulum-v1.zip"


def member(model, name):
    with zipfile.ZipFile(model) as archive:
        return archive.read(name)


def learner_state_with(model, path, value):
    """`model`'s state.msgpack with the leaf at `path` (keys from the root) set to `value`."""
    tree = serialization.msgpack_restore(member(model, "state.msgpack"))
    leaf = tree
    for key in path[:-1]:
        leaf = leaf[key]
    leaf[path[-1]] = np.full_like(leaf[path[-1]], value)
    return serialization.msgpack_serialize(tree)


def env_state_with(model, edit):
    """`model`'s host/device_envs.npy, its msgpack tree changed by `edit(tree)`."""
    tree = serialization.msgpack_restore(np.load(io.BytesIO(member(model, "host/device_envs.npy"))).tobytes())
    edit(tree)
    return npy(np.frombuffer(serialization.msgpack_serialize(tree), np.uint8))


def assert_refused(tmp_path, capsys, checkpoint, base, reason, *argv, code=2):
    assert main(["-f", str(tmp_path / "logs"), *base, "-i", str(checkpoint), "-n", "20", *argv]) == code
    err = capsys.readouterr().err
    assert reason in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "logs").exists()


# -- item 2: values are checked, not only shapes ------------------------------------------------------


@pytest.mark.parametrize(
    "path,value,reason",
    [
        (
            ("actor", "opt_state", "hyperparams", "learning_rate"),
            np.inf,
            "state.msgpack holds inf at actor.opt_state.hyperparams.learning_rate",
        ),
        (("exploration",), np.nan, "state.msgpack holds NaN at exploration"),  # the OU noise state
        (("critic", "opt_state", "count"), -(2**31), "state.msgpack holds the negative count -2147483648 at"),
    ],
    ids=["infinite learning rate", "NaN noise state", "negative optimizer count"],
)
def test_a_forged_learner_state_value_exits_2_before_any_run_folder(tmp_path, capsys, td3_model, path, value, reason):
    """It was accepted: an infinite learning rate diverged at once and the divergence checkpoint held it (its
    message calling the state at the resumed step finite); a NaN noise state trained to the end on NaN."""
    forged = forge(td3_model, tmp_path / "forged.zip", {"state.msgpack": learner_state_with(td3_model, path, value)})
    assert_refused(tmp_path, capsys, forged, TD3_OU, reason)


@pytest.mark.parametrize(
    "name,edit,reason",
    [
        ("host/obs.npy", lambda a: a.__setitem__((0, 1), np.nan), "host/obs.npy holds NaN at [0, 1]"),
        ("host/episode_lengths.npy", lambda a: a.__setitem__(0, -1), "host/episode_lengths.npy holds the negative"),
        ("host/episode_lengths.npy", lambda a: a.__setitem__(0, 10**9), "host/episode_lengths.npy holds 1000000000"),
        ("replay_buffer/rows.npy", lambda a: a.__setitem__((5, 2), np.inf), "replay_buffer/rows.npy holds inf"),
        ("replay_buffer/position.npy", lambda a: a.fill(7), "replay_buffer/position.npy holds 7, but a buffer"),
    ],
    ids=["NaN observation", "negative episode length", "episode longer than the run", "inf row", "position"],
)
def test_a_forged_host_or_buffer_value_exits_2_before_any_run_folder(tmp_path, capsys, td3_model, name, edit, reason):
    array = np.load(io.BytesIO(member(td3_model, name))).copy()
    edit(array)
    forged = forge(td3_model, tmp_path / "forged.zip", {name: npy(array)})
    assert_refused(tmp_path, capsys, forged, TD3_OU, reason)


@pytest.mark.parametrize(
    "field,value",
    [("obs", np.nan), ("state.theta", np.nan), ("elapsed", -(2**31)), ("elapsed", 51), ("next_start.obs", np.inf)],
    ids=["NaN obs", "NaN theta", "negative elapsed", "elapsed past the time limit", "inf next start"],
)
def test_a_forged_env_state_value_exits_2_before_any_run_folder(tmp_path, capsys, device_model, field, value):
    """It was accepted: NaN envs trained to the end and exited 1 with nothing saved; a negative step count
    switched the time limit off (no episode ended)."""

    def edit(tree):
        *parents, name = field.split(".")
        leaf = tree
        for key in parents:
            leaf = leaf[key]
        leaf[name] = np.full_like(leaf[name], value)

    forged = forge(device_model, tmp_path / "forged.zip", {"host/device_envs.npy": env_state_with(device_model, edit)})
    shown = str(value) if field == "elapsed" else "inf" if value == np.inf else "NaN"
    assert_refused(tmp_path, capsys, forged, DEVICE, f"host/device_envs.npy holds {shown} at {field}")


@pytest.mark.parametrize(
    "edit",
    [lambda tree: tree["state"].pop("theta"), lambda tree: tree.pop("next_start")],
    ids=["another env's state", "saved before envs carried their next starts"],
)
def test_an_env_state_of_another_env_is_named_as_such_before_any_run_folder(tmp_path, capsys, device_model, edit):
    """Item 8: it was refused only once the run folders were claimed, as "the saved learner state"."""
    forged = forge(device_model, tmp_path / "forged.zip", {"host/device_envs.npy": env_state_with(device_model, edit)})
    assert_refused(tmp_path, capsys, forged, DEVICE, "the env state saved in host/device_envs.npy does not match")


@pytest.mark.parametrize(
    "depth,reason",
    [(1020, "nested more than 64 levels deep"), (5000, "nested too deeply to parse")],
    ids=["1020 levels", "5000 levels"],
)
def test_a_deeply_nested_env_state_is_one_line(tmp_path, capsys, device_model, depth, reason):
    """Item 6: 1,020 levels raised RecursionError in flax (exit 1, a run folder left); 5,000 printed '()'."""
    state = npy(np.frombuffer(nested_msgpack(depth), np.uint8))
    forged = forge(device_model, tmp_path / "forged.zip", {"host/device_envs.npy": state})
    expected = (
        f"corrupt or incomplete checkpoint: {forged} (host/device_envs.npy is not a readable env state ({reason}))"
    )
    assert_refused(tmp_path, capsys, forged, DEVICE, expected, code=1)


def test_a_wandb_run_id_wandb_refuses_exits_2_before_any_run_folder(tmp_path, capsys, td3_model, monkeypatch):
    """Item 6: W&B's UsageError was a 66-line traceback, exit 1, with a run folder left."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))

    def edit(manifest):
        manifest["wandb_run_id"] = "run/1"

    forged = forge(td3_model, tmp_path / "forged.zip", edit=edit)
    assert_refused(tmp_path, capsys, forged, TD3_OU, "manifest wandb_run_id: 'run/1' is not a W&B run id", "--track")
    assert not (tmp_path / "wandb").exists()


# -- item 2: no checkpoint is written holding NaN or inf -------------------------------------------------


def test_a_checkpoint_is_never_written_with_a_non_finite_learner_state(tmp_path, td3_model):
    """The divergence path wrote the state it was given under a new name; and the state a run starts from
    is the first verified one, so it is checked too."""
    checkpoint = read_checkpoint(td3_model)
    algo = ALGORITHMS["td3"]
    _, _, learner_keys = split_entry(normalize_entry(dict(checkpoint.manifest.run.hyperparams), "x"), "x", ())
    learner = algo.make_learner(algo.build_config(learner_keys, 1, "x"), EnvSpec(3, 1))
    forged = learner_state_with(td3_model, ("actor", "opt_state", "hyperparams", "learning_rate"), np.inf)
    state = state_from_bytes(learner.init_fn(jax.random.key(0)), forged)
    with pytest.raises(DivergenceError, match=r"holds NaN or inf \(actor\.opt_state\.hyperparams\.learning_rate"):
        DivergenceGuard(SeedAxis(1)).start(500, state, {})
    host = new_host_state([3], checkpoint.group("host")["obs"][None], jax.random.key(0), EnvSpec(3, 1), 100, 1)
    settings = CheckpointSettings(tmp_path, "model", checkpoint.manifest.run)
    path = tmp_path / "rl_model_700_steps.zip"
    with pytest.raises(DivergenceError, match=r"rl_model_700_steps\.zip is not written with it"):
        RunCheckpoints([settings], SeedAxis(1), 1).write_seed(path, "failure", host, 0, state, None, None)
    assert not any(tmp_path.iterdir())


# -- item 8: a writer killed mid-save leaves nothing behind once -i has read its folder ----------------------


def test_resuming_removes_what_a_writer_killed_mid_save_left_in_the_old_folder(tmp_path, td3_model):
    old = tmp_path / "old"
    shutil.copytree(td3_model.parent, old)
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_MID_SAVE.replace("best_model", "rl_model_400_steps"), str(old)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "stalled"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert len(list(old.glob(".rl_model_400_steps.zip.*.tmp"))) == 1
    before = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in old.iterdir() if path.is_file()}
    assert main(["-f", str(tmp_path / "logs"), *TD3_OU, "-i", str(old / "Pendulum-v1.zip"), "-n", "20"]) == 0
    assert not list(old.glob("*.tmp"))
    after = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in old.iterdir() if path.is_file()}
    assert after == {name: digest for name, digest in before.items() if not name.endswith(".tmp")}
    assert json.loads(member(tmp_path / "logs" / "td3" / "Pendulum-v1_1" / "Pendulum-v1.zip", "manifest.json"))
