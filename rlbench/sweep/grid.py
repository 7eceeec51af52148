"""A sweep's grid: what it runs, and the names it runs them under.

The grid is algos x envs x settings x seeds: `--grid policy_delay:1,3 gamma:0.98,0.99` makes four
settings, each a set of -params tokens applied after the shared ones. A *cell* is one (algo, env,
setting, seed): one train.py run folder. A *task* is one process on a Ray worker: up to
`seeds_per_process` consecutive seeds of one (algo, env, setting), trained as one vmapped learner.

Pure values, nothing read or written: what the manifest records of each cell is rlbench.sweep.manifest.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlbench.config.entry import NOT_SUPPORTED_KEYS, RUN_KEYS, normalize_entry
from rlbench.config.hyperparams import merge
from rlbench.config.literals import parse_key_values
from rlbench.config.registry import get_algo
from rlbench.envs.make import env_file_name
from rlbench.errors import ConfigError

SWEEPS_FOLDER = "sweeps"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Cell:
    """One run: an algorithm on an env with one setting of the grid's keys and one seed."""

    algo: str
    env: str
    setting: tuple[tuple[str, str], ...]  # (key, value) per --grid axis, in the axes' order
    seed: int

    @property
    def setting_label(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.setting)

    @property
    def key(self) -> str:
        """The cell's id in the manifest."""
        label = ",".join(f"{key}={value}" for key, value in self.setting)
        return f"{self.algo}/{self.env}/{label or '-'}/{self.seed}"

    @property
    def group(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        """What the seeds of one curve share: algo, env and setting."""
        return (self.algo, self.env, self.setting)

    def params(self, spec: SweepSpec) -> tuple[str, ...]:
        """The cell's -params: the shared ones, the algorithm's own (--params-for), then its setting."""
        ordered = [*spec.params, *dict(spec.params_for).get(self.algo, ()), *(f"{k}:{v}" for k, v in self.setting)]
        last = {token.partition(":")[0].strip(): token for token in ordered}  # a later token wins on its key
        return tuple(last.values())


@dataclass(frozen=True)
class Task:
    """Consecutive seeds of one (algo, env, setting): one process, one run of `len(cells)` seeds."""

    cells: tuple[Cell, ...]

    @property
    def id(self) -> str:
        """A plain folder name, the same in every invocation for the same cells (staging, logs)."""
        first = self.cells[0]
        digest = hashlib.sha256(first.key.rsplit("/", 1)[0].encode()).hexdigest()[:8]
        seeds = str(first.seed) if len(self.cells) == 1 else f"{first.seed}-{self.cells[-1].seed}"
        env = re.sub(r"[^A-Za-z0-9._-]", "_", first.env)
        return f"{first.algo}_{env}_{digest}_s{seeds}"

    @property
    def label(self) -> str:
        first = self.cells[0]
        seeds = f"seed {first.seed}" if len(self.cells) == 1 else f"seeds {first.seed}-{self.cells[-1].seed}"
        setting = f" {first.setting_label}" if first.setting else ""
        return f"{first.algo} {first.env}{setting} {seeds}"


@dataclass(frozen=True)
class SweepSpec:
    """What defines a sweep's results; the same name with another spec is refused (`grid_differences`)."""

    name: str
    algos: tuple[str, ...]
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    n_timesteps: int = -1  # -1: each hyperparameter file entry's
    params: tuple[str, ...] = ()
    params_for: tuple[tuple[str, tuple[str, ...]], ...] = ()
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values) per axis
    conf_file: str | None = None
    eval_freq: int = 10_000
    eval_episodes: int = 5
    file_hashes: tuple[tuple[str, str], ...] = field(default=())  # (file, sha256) of the hyperparameter files

    def settings(self) -> list[tuple[tuple[str, str], ...]]:
        axes = [[(key, value) for value in values] for key, values in self.grid]
        return [tuple(combo) for combo in itertools.product(*axes)]

    def cells(self) -> list[Cell]:
        return [
            Cell(algo, env, setting, seed)
            for algo in self.algos
            for env in self.envs
            for setting in self.settings()
            for seed in self.seeds
        ]

    def record(self) -> dict[str, Any]:
        """The spec as the manifest stores it (JSON types only)."""
        return {
            "algos": list(self.algos),
            "envs": list(self.envs),
            "seeds": list(self.seeds),
            "n_timesteps": self.n_timesteps,
            "params": list(self.params),
            "params_for": {algo: list(tokens) for algo, tokens in self.params_for},
            "grid": {key: list(values) for key, values in self.grid},
            "conf_file": self.conf_file,
            "eval_freq": self.eval_freq,
            "eval_episodes": self.eval_episodes,
            "hyperparameter_files": dict(self.file_hashes),
        }


def parse_grid(tokens: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`--grid key:v1,v2 ...` -> ((key, (v1, v2)), ...); ConfigError naming the bad token. Values are
    -params values; a value containing a comma (a list, a dict(...)) is written inside brackets, e.g.
    `policy_kwargs:dict(net_arch=[64,64]),None` splits at the top-level commas only."""
    axes: dict[str, tuple[str, ...]] = {}
    for token in tokens:
        key, colon, values = token.partition(":")
        key = key.strip()
        if not colon or not key or not values.strip():
            raise ConfigError(f"--grid {token!r}: expected KEY:VALUE1,VALUE2,... (e.g. policy_delay:1,3)")
        if key in axes:
            raise ConfigError(f"--grid {token!r}: {key} is already an axis of the grid")
        split = _split_top_level(values)
        if any(not value for value in split):
            raise ConfigError(f"--grid {token!r}: an empty value (expected KEY:VALUE1,VALUE2,...)")
        if len(set(split)) != len(split):
            raise ConfigError(f"--grid {token!r}: a value is listed twice")
        axes[key] = tuple(split)
    return tuple(axes.items())


# Keys of the run, its envs and RL Zoo's unsupported features: each cell checks them with its env's entry.
CHECKED_BY_THE_CELL = frozenset({*RUN_KEYS, *NOT_SUPPORTED_KEYS, "env_wrapper", "frame_stack"})


def check_learner_values(algos: Sequence[str], axes: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Each --grid value of a learner key, read by each algorithm's config reader over the algorithm's
    preset: a value no entry makes valid (a wrong type, out of range, a key the algorithm does not read) is
    one line (ConfigError) before anything runs, not a failed cell for every seed and env."""
    for key, values in axes:
        if key in CHECKED_BY_THE_CELL:
            continue
        for value, name in itertools.product(values, algos):
            where = f"--grid {key}:{value}, --algos {name}"
            entry = normalize_entry(parse_key_values([f"{key}:{value}"], "--grid"), where)
            algo = get_algo(name)
            try:
                with warnings.catch_warnings():  # a value that is ignored without other keys: the cell says so
                    warnings.simplefilter("ignore")
                    algo.build_config(merge(algo.preset, entry), 1, where)
            except ConfigError as error:
                raise ConfigError(str(error) if where in str(error) else f"{error} (from {where})") from None


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


def make_tasks(cells: Sequence[Cell], seeds_per_process: int) -> list[Task]:
    """Cells grouped into processes: up to `seeds_per_process` consecutive seeds of one algo, env and
    setting each, in grid order."""
    tasks: list[Task] = []
    batch: list[Cell] = []
    for cell in cells:
        joins = batch and batch[-1].group == cell.group and batch[-1].seed + 1 == cell.seed
        if batch and (not joins or len(batch) == seeds_per_process):
            tasks.append(Task(tuple(batch)))
            batch = []
        batch.append(cell)
    if batch:
        tasks.append(Task(tuple(batch)))
    return tasks


def sweep_dir(log_root: Path, name: str) -> Path:
    return Path(log_root) / SWEEPS_FOLDER / name


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"--name {name!r}: expected a plain folder name (letters, digits, '.', '_', '-')")
    return name


def default_name(algos: Sequence[str], envs: Sequence[str]) -> str:
    """`<algos>_<envs>`, e.g. sac-crossq_HalfCheetah-v4: the same command finds the same sweep again."""
    text = "-".join(algos) + "_" + "-".join(env_file_name(env) for env in envs)
    text = re.sub(r"[^A-Za-z0-9._-]", "_", text)
    if len(text) > 100:
        text = text[:90] + "_" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return text
