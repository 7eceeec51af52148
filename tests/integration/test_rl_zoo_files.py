"""RL Zoo's own hyperparameter files run unchanged (issues 18, 34): every entry of RL Zoo's sac.yml, tqc.yml,
crossq.yml, td3.yml and ddpg.yml (tests/data/rl_zoo/, copied as they are) whose env is installed here resolves
and trains 260 steps, or exits 2 naming a key the README lists as not supported. Training starts at step 250
(150 with train_freq in episodes) instead of the entries' 5,000-10,000, the one override: the update of every
entry compiles and runs (its saved model counts its gradient steps), a few times only, at a cost CI can afford
for CrossQ's [2048, 2048] critics. 260 steps cover every train_freq of the files (1 to 64: one training round
ends at step 256).

Many entries differ only in their env, n_timesteps and learning_starts (RL Zoo's MuJoCo entries are one
setting for five envs). The first entry of each (algo, setting, env family) trains; the others are
resolved as train.py resolves them (every key checked, their env built, reset and stepped with the
entry's wrappers): what their training would add is the same compiled update at other shapes."""

import re
from pathlib import Path

import gymnasium as gym
import pytest

from rlbench.cli.train import build_parser, request_from_args
from rlbench.cli.train import main as train
from rlbench.config.entry import NOT_SUPPORTED_KEYS
from rlbench.config.hyperparams import read_file
from rlbench.envs.make import import_env_packages
from rlbench.errors import ConfigError
from rlbench.run.experiment import resolve
from rlbench.store.checkpoint import read_checkpoint
from tests.conftest import REPO_ROOT

RL_ZOO = Path(REPO_ROOT) / "tests" / "data" / "rl_zoo"
# What the README lists as not supported (Hyperparameter files), with the refusal each gets.
REFUSALS = {key: rf"hyperparameter '{key}' is not supported yet" for key in NOT_SUPPORTED_KEYS}
# RL Zoo's own wrappers (rl_zoo3.wrappers) are code from a module rlbench does not trust by default.
REFUSALS["env_wrapper"] = r"env_wrapper '[\w.]+': module '[\w.]+' is not trusted"


ALGOS = ("sac", "tqc", "crossq", "td3", "ddpg", "dqn", "qrdqn")
# DDPG is TD3 with a preset: an entry whose setting trains as TD3's is resolved only.
TRAINS_AS = {"ddpg": "td3"}


def env_family(env_id: str) -> str:
    """The package an env comes from: what, beside the shapes, can change how its entry trains."""
    module = str(gym.spec(env_id).entry_point).partition(":")[0].split(".")
    return ".".join(module[:3] if module[0] == "gymnasium" else module[:1])  # gymnasium.envs.mujoco, pybullet_envs


def installed_entries():
    """(algo, env id, entry, whether it trains): the first of each (algo, setting, env family) trains."""
    seen = set()
    for algo in ALGOS:
        for env_id, entry in read_file(RL_ZOO / f"{algo}.yml").items():
            if env_id == "default":
                continue
            import_env_packages(env_id)
            if env_id in gym.registry:
                setting = sorted(
                    (k, repr(v)) for k, v in (entry or {}).items() if k not in ("n_timesteps", "learning_starts")
                )
                signature = (TRAINS_AS.get(algo, algo), repr(setting), env_family(env_id))
                yield pytest.param(algo, env_id, entry, signature not in seen, id=f"{algo}-{env_id}")
                seen.add(signature)


ENTRIES = list(installed_entries())


def test_the_copies_hold_rl_zoos_entries_for_the_installed_envs():
    assert len(ENTRIES) >= 80  # MuJoCo, PyBullet, Box2D and classic control, for all five algorithms
    ids = {param.id for param in ENTRIES}
    assert {"sac-HalfCheetahBulletEnv-v0", "tqc-Hopper-v4", "crossq-HalfCheetah-v4", "td3-Hopper-v4"} <= ids
    assert {"ddpg-MountainCarContinuous-v0"} <= ids


@pytest.mark.slow
@pytest.mark.parametrize("algo,env_id,entry,trains", ENTRIES)
def test_rl_zoo_entry_trains_or_is_refused_by_name(tmp_path, capsys, algo, env_id, entry, trains):
    argv = ["--algo", algo, "--env", env_id, "-conf", str(RL_ZOO / f"{algo}.yml"), "-n", "260", "--seed", "1"]
    argv += ["-f", str(tmp_path), "--verbose", "0", "--eval-freq", "260", "--eval-episodes", "1"]
    # With train_freq in episodes training waits for an episode end past learning_starts: HumanoidBulletEnv-v0's
    # (ddpg.yml) come about every 20 steps under random actions, so 150 leaves room for several before step 260.
    episodic = isinstance(entry.get("train_freq"), list) and "episode" in entry["train_freq"]
    argv += ["-params", f"learning_starts:{150 if episodic else 250}"]
    if not trains:  # its setting trains in the first entry of its env family
        try:
            resolve(request_from_args(build_parser().parse_args(argv)))
            return
        except ConfigError as error:
            code, err = 2, str(error)
    else:
        code = train(argv)
        err = capsys.readouterr().err
    if code == 0:
        model = read_checkpoint(tmp_path / algo / f"{env_id}_1" / f"{env_id}.zip", load_replay_buffer=False)
        counters = model.manifest.counters
        assert counters.env_steps == 260 and counters.gradient_steps > 0, counters
        return
    refused = [key for key, message in REFUSALS.items() if key in entry and re.search(message, err)]
    assert code == 2 and refused, f"exit {code}: {err[-2000:]}"
