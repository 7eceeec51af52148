"""Command-line flags as data: the flags several commands share are defined once, here.

train.py, enjoy.py, the sweep (rlbench.sweep.command) and the benchmarks (rlbench.bench) each build their
parser from a table of `Flag`s: a shared one by name (`shared("device", help=...)`, with what differs for
that command), its own with `flag(...)`. `Group`s give argparse's titled and mutually exclusive groups.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rlbench.config.registry import ALGORITHMS
from rlbench.errors import OneLineParser
from rlbench.run import compile_cache
from rlbench.run.device import split_device


def str2bool(text: str) -> bool:
    """Real booleans for flags that take a value (RL Zoo's `type=bool` made "False" true)."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {text!r}")


def device_flag(text: str) -> str:
    """argparse's type for --device: the text, checked by split_device."""
    try:
        split_device(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def add_bool_flag(p: argparse._ActionsContainer, *names: str, help: str) -> None:
    """`--flag`, `--flag true|false` and `--no-flag` all work; the default is False. A flag named in the
    negative (`--no-optim-plots`) gets the positive as its opposite (`--optim-plots`), not `--no-no-...`."""
    name = names[-1].lstrip("-")
    dest = name.replace("-", "_")
    p.add_argument(*names, dest=dest, nargs="?", const=True, default=False, type=str2bool, help=help)
    opposite = name.removeprefix("no-") if name.startswith("no-") else "no-" + name
    p.add_argument("--" + opposite, dest=dest, action="store_false", help=argparse.SUPPRESS)


@dataclass(frozen=True)
class Flag:
    """One flag: its names and argparse's options; `boolean` flags are added by add_bool_flag."""

    names: tuple[str, ...]
    options: Mapping[str, Any]
    boolean: bool = False


@dataclass(frozen=True)
class Group:
    """Flags under a title in --help, or (`exclusive`) of which at most one may be given."""

    flags: tuple[Flag | Group, ...]
    title: str | None = None
    exclusive: bool = False


def flag(*names: str, boolean: bool = False, **options: Any) -> Flag:
    return Flag(names, options, boolean)


def add_flags(parser: argparse._ActionsContainer, table: Iterable[Flag | Group]) -> None:
    """Add a table of flags and groups to a parser (or a group of one), in order."""
    for item in table:
        if isinstance(item, Group):
            exclusive = item.exclusive
            group = parser.add_mutually_exclusive_group() if exclusive else parser.add_argument_group(item.title)
            add_flags(group, item.flags)
        elif item.boolean:
            add_bool_flag(parser, *item.names, help=item.options["help"])
        else:
            parser.add_argument(*item.names, **item.options)


def parser_from(table: Iterable[Flag | Group], **options: Any) -> argparse.ArgumentParser:
    """A OneLineParser (`options`: prog, description) with the flags of `table`."""
    parser = OneLineParser(**options)
    add_flags(parser, table)
    return parser


# The shared flags, spelled as train.py spells them; a command changes what differs (a default, its help).
SHARED: dict[str, Flag] = {
    "algo": flag("--algo", default="sac", help=f"algorithm: {', '.join(ALGORITHMS)}"),
    "env": flag("--env", default="Pendulum-v1", help="gymnasium environment id (or module:EnvId)"),
    "n_timesteps": flag("-n", "--n-timesteps", type=int, default=-1, help="env steps (overrides the file)"),
    "seed": flag("--seed", type=int, default=-1, help="random seed; < 0 draws one (printed and saved)"),
    "log_folder": flag("-f", "--log-folder", default="logs", help="log root folder"),
    "eval_freq": flag("--eval-freq", type=int, default=25_000, help="evaluate every n env steps (< 0: never)"),
    "eval_episodes": flag("--eval-episodes", type=int, default=5, help="episodes per evaluation"),
    "hyperparams": flag(
        "-params",
        "--hyperparams",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="override hyperparameters, e.g. learning_rate:1e-3 policy_kwargs:dict(net_arch=[64,64])",
    ),
    "params_for": flag(
        "--params-for",
        nargs="+",
        action="append",
        default=[],
        metavar=("ALGO", "KEY:VALUE"),
        help="overrides for one algorithm's runs, after -params (repeat per algorithm)",
    ),
    "conf_file": flag(
        "-conf",
        "--conf-file",
        default=None,
        help="hyperparameter file (.yml/.yaml, .py or module); default hyperparams/<algo>.yml",
    ),
    "env_kwargs": flag("--env-kwargs", nargs="+", default=[], metavar="KEY:VALUE", help="env constructor kwargs"),
    "gym_packages": flag(
        "--gym-packages",
        nargs="+",
        default=[],
        metavar="MODULE",
        help="modules to import before making the env (they register custom envs; their wrappers "
        "are trusted in env_wrapper)",
    ),
    "trust_wrappers": flag(
        "--trust-wrappers",
        nargs="+",
        default=[],
        metavar="MODULE",
        help="modules whose gymnasium.Wrapper classes env_wrapper may name, besides gymnasium's and "
        "rlbench's (a file read back, such as a checkpoint's manifest, can name no others)",
    ),
    "verbose": flag("--verbose", type=int, default=1, choices=(0, 1, 2), help="0 quiet, 1 info"),
    "progress": flag("-P", "--progress", action="store_true", help="show a progress bar with fps and last eval"),
    "device": flag(
        "--device",
        default="auto",
        type=device_flag,
        help="JAX backend: auto (GPU if present), cpu, gpu, or gpu:N (cuda:N) for the N-th GPU",
    ),
    "num_threads": flag(
        "--num-threads", type=int, default=-1, help="-1: XLA's default (all cores); 1: single-threaded XLA on CPU"
    ),
    "compile_cache": flag(
        "--compile-cache",
        default=None,
        metavar="DIR|none",
        help=f"persistent compilation cache folder (default: ${compile_cache.ENV_VAR}, else "
        "~/.cache/rlbench/jax); none turns it off",
    ),
    "track": flag("--track", boolean=True, help="track the run on Weights & Biases (offline when W&B is unreachable)"),
    "wandb_project_name": flag("--wandb-project-name", default="sb3", help="W&B project"),
    "wandb_entity": flag("--wandb-entity", default=None, help="W&B entity (team or user)"),
    "wandb_tags": flag("-tags", "--wandb-tags", nargs="+", default=[], help="W&B tags"),
    # A grid of runs (the sweep, bench returns).
    "algos": flag("--algos", nargs="+", default=["sac"], help=f"of {', '.join(ALGORITHMS)}"),
    "envs": flag("--envs", nargs="+", default=["Pendulum-v1"], help="gymnasium env ids"),
    "address": flag(
        "--address",
        default=None,
        help="a running Ray cluster: auto or HOST:PORT (default: a private Ray instance on this machine)",
    ),
    "at_steps": flag("--at-steps", type=int, default=100_000, help="the report's second table: returns at n steps"),
    # The benchmarks' peer: SBX in a virtual environment of its own.
    "peer": flag(
        "--peer",
        default=None,
        metavar="PYTHON",
        help='python of a virtual environment with SBX and RL Zoo (pip install sbx-rl rl_zoo3 "gymnasium[mujoco]"), '
        "to run SBX side by side",
    ),
    "peer_device": flag("--peer-device", default="cpu", choices=("cpu", "gpu"), help="JAX backend of the peer"),
}


def shared(name: str, **changes: Any) -> Flag:
    """The shared flag `name`, with `changes` over its options (this command's default or help)."""
    base = SHARED[name]
    return dataclasses.replace(base, options={**base.options, **changes})


def seeds_group(metavar: str | None = None) -> Group:
    """A grid's seeds: --seeds N (1..N) or --seed-list (these), not both."""
    count: dict[str, Any] = {"metavar": metavar} if metavar else {}  # argparse options
    return Group(
        (
            flag("--seeds", type=int, default=3, **count, help="seeds 1..N (default 3)"),
            flag("--seed-list", type=int, nargs="+", default=None, metavar="SEED", help="these seeds"),
        ),
        exclusive=True,
    )
