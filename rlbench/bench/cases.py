"""Which rows `bench speed` measures: the off-policy cases (--case, --algos or DEFAULT_CASES), the entry
algorithms among --algos, and the checks of those choices before anything is measured."""

from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym

from rlbench.bench.entry_row import ENTRY_ALGOS
from rlbench.bench.peer_hyperparams import missing_peers
from rlbench.config.registry import get_algo
from rlbench.envs.envpool_vector import is_envpool, task_id
from rlbench.envs.jax_native.ids import is_jax_native
from rlbench.errors import ConfigError
from rlbench.types import VecEnvKind

# An off-policy case: (algo, n_envs, gradient_steps, steps timed, critic widths).
Case = tuple[str, int, int, int, list[int]]
DEFAULT_CASES: list[Case] = [
    ("sac", 1, 1, 3000, [256, 256]),
    ("sac", 8, 8, 4000, [256, 256]),
    ("droq", 1, 20, 300, [256, 256]),
    ("crossq", 1, 1, 1000, [1024, 1024]),
]


def host_twin(env_id: str) -> str | None:
    """For a JAX-native or EnvPool id, the gymnasium env it mirrors, whose rows (rlbench's host loop, the
    --peer's) follow its own: gymnax's classic-control envs and EnvPool's are gymnasium's, under the same names.
    None: no twin."""
    if is_envpool(env_id):
        return task if (task := task_id(env_id)) in gym.registry else None
    if not is_jax_native(env_id):
        return None
    prefix, _, name = env_id.partition(":")
    return name if prefix == "gymnax" and name in gym.registry else None


def row_envs(env_id: str) -> list[tuple[str, VecEnvKind]]:
    """The (env id, --vec-env) of an off-policy case's rlbench rows: the env itself; for an EnvPool id also its
    device loop (envpool-xla); then its host twin's."""
    rows: list[tuple[str, VecEnvKind]] = [(env_id, "dummy")]
    if is_envpool(env_id):
        rows.append((env_id, "envpool-xla"))
    if (twin := host_twin(env_id)) is not None:
        rows.append((twin, "dummy"))
    return rows


def check_algos(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The algorithms and flags of the rows asked for, before anything is measured: an unknown algorithm or
    `--peer` with one SBX does not have (A2C) raises ConfigError (one line, exit 2); a flag the entry rows do
    not take, or a peer script not found, is a usage error."""
    if args.algos and args.case:
        p.error("--algos and --case: one or the other (--case names the off-policy cases one by one)")
    algos = list(args.algos or [case[0] for case in args.case or DEFAULT_CASES])
    for algo in algos:
        get_algo(algo)
    entry_rows = [algo for algo in algos if algo in ENTRY_ALGOS]
    if args.case and entry_rows:
        p.error(f"--case {entry_rows[0]}: entry rows train RL Zoo's entry for --env; use --algos {entry_rows[0]}")
    if entry_rows:
        refused = {"--n-seeds": args.n_seeds, "--first-step": args.first_step,
                   "--policy": args.policy != "MlpPolicy", "--precision": args.precision != ["float32"]}  # fmt: skip
        for name, given in refused.items():
            if given:
                p.error(f"{name}: not with entry rows ({', '.join(entry_rows)}), which train RL Zoo's entry as it is")
    if args.peer and (refusal := missing_peers(algos)):
        raise ConfigError(refusal)
    scripts = ([args.peer_script] if len(entry_rows) < len(algos) else []) + (
        [args.peer_on_policy_script] if entry_rows else []
    )
    if args.peer and not (Path(args.peer).exists() and all(script.exists() for script in scripts)):
        p.error(
            f"--peer {args.peer} / {' / '.join(map(str, scripts))}: not found (all must exist to run SBX side by "
            "side; see ../shared/bench/README.md for the peer's venv)"
        )


def cases_from(args: argparse.Namespace) -> list[Case]:
    """(algo, n_envs, gradient_steps, steps, critic widths) of each off-policy case: --case's, --algos' (their
    DEFAULT_CASES, else 1 env x 1 gradient step, with --steps), or DEFAULT_CASES."""
    if args.algos:
        cases: list[Case] = []
        for algo in (a for a in dict.fromkeys(args.algos) if a not in ENTRY_ALGOS):
            qf = args.qf or ([1024, 1024] if algo == "crossq" else [256, 256])
            defaults = [case for case in DEFAULT_CASES if case[0] == algo] or [(algo, 1, 1, 3000, qf)]
            cases += [(a, e, g, args.steps or s, args.qf or q) for a, e, g, s, q in defaults]
        return cases
    if not args.case:
        return DEFAULT_CASES
    return [
        (a, int(e), int(g), int(s), args.qf or [1024, 1024] if a == "crossq" else args.qf or [256, 256])
        for a, e, g, s in args.case
    ]


def entry_algos(args: argparse.Namespace) -> list[str]:
    """The algorithms among --algos whose rows train RL Zoo's entry (PPO, A2C, DQN, QR-DQN), once each, in order."""
    return [algo for algo in dict.fromkeys(args.algos or []) if algo in ENTRY_ALGOS]
