"""Training-throughput benchmark, side by side with SBX (`python -m rlbench.bench speed`).

Each row: steady-state env-steps/s and gradient-steps/s of a whole training loop (env stepping,
acting, inserting, fused updates), timed after a warm-up that pays for compilation, in the JSON fields
of ../shared/bench/sbx_speed.py; with `--peer PYTHON` the SBX script runs with the same settings right
after each rlbench row, in the same invocation. Each rlbench row runs in a fresh process, so that its
compile time and peak memory are its own, and adds:

- `compile_s`: wall time of the first training iteration (compiling the update, plus one step);
- `update_only_grad_steps_per_s`: the compiled fused update alone on fixed batches (no env, no host):
  the ceiling the loop can reach; `loop_efficiency` = gradient-steps/s over it;
- `gflop_per_grad_step`: XLA's cost analysis of one gradient step (critic, plus the actor and
  temperature half divided by `policy_delay`, since it runs that much less often);
- `achieved_gflops` and `fraction_of_peak`: against the machine's measured matrix-multiply peak
  (the best of a few square and network-shaped float32 products, measured once per invocation);
- `peak_rss_mib` (host) and, on a GPU, `peak_device_mib`.

PPO, A2C, DQN and QR-DQN (`--algos ppo a2c dqn qrdqn`) train RL Zoo's entry for the env instead
(rlbench.bench.entry_row: their updates and gradient steps; their FLOP are not counted, "n/a"); their peer is
SBX's PPO or DQN on the same entry (SBX has no A2C or QR-DQN: `--peer` with them is refused).

`--first-step` measures instead the time to the first gradient step (`first_grad_step_s`: building the
envs and learner, every compilation, the random warm-up, up to the end of the first update), cold (an
empty compilation cache) then warm (the cache the cold process filled), each in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from rlbench.bench.cases import cases_from, check_algos, entry_algos, host_twin, row_envs
from rlbench.bench.children import Row, rlbench_row_in_subprocess, row_from, run_child, stopping_children
from rlbench.bench.entry_row import ENTRY_ALGOS, entry_peer_row, entry_row
from rlbench.bench.entry_row import PEER_SCRIPT as ENTRY_PEER_SCRIPT
from rlbench.bench.row import first_step_row, rlbench_row
from rlbench.bench.seed_packing import packing_rows
from rlbench.cli.flags import flag, parser_from, shared
from rlbench.errors import ConfigError
from rlbench.networks.trunk import POLICIES
from rlbench.report.returns import cpu_model
from rlbench.run.exit_codes import exit_code

PEER_SCRIPT = Path(__file__).resolve().parents[3] / "shared" / "bench" / "sbx_speed.py"


def matmul_peak_gflops(dtype: DTypeLike = jnp.float32, repeats: int = 5) -> dict[str, float]:
    """Best GFLOP/s of plain-layout products [m, k] @ [k, n] (float32 accumulation) on the default device."""
    shapes = [(256, 256, 256), (256, 1024, 1024), (512, 1024, 1024), (2048, 2048, 2048)]
    work = 2e9  # FLOP per timing: 7-30 ms on a 2-core CPU (70-280 GFLOP/s); 2048^3 is one product, 17 GFLOP
    if jax.default_backend() == "gpu":  # a GPU's peak needs big products, and many per timing to hide dispatch
        shapes, work = [*shapes, (8192, 8192, 8192)], 2e13
    key = jax.random.PRNGKey(0)
    product = jax.jit(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32))
    rates = {}
    for m, k, n in shapes:
        a = jax.random.normal(key, (m, k)).astype(dtype)
        b = jax.random.normal(key, (k, n)).astype(dtype)
        product(a, b).block_until_ready()
        calls = min(2000, max(1, int(work / (2 * m * k * n))))  # (the cap: small products on a GPU)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                out = product(a, b)
            out.block_until_ready()
            best = min(best, (time.perf_counter() - start) / calls)
        rates[f"{m}x{k}x{n}"] = round(2 * m * k * n / best / 1e9, 1)
    return rates


def first_step_rows(case: Row, device: str) -> list[Row]:
    """The cold and the warm row of one case: two fresh processes sharing a new, empty cache folder."""
    with tempfile.TemporaryDirectory(prefix="rlbench-cache-") as cache:
        rows = []
        for state in ("cold", "warm"):
            command = [
                sys.executable,
                "-m",
                "rlbench.bench",
                "speed",
                "--device",
                device,
                "--compile-cache",
                cache,
                "--one-first-step",
                json.dumps(case),
            ]
            done = run_child(command)
            rows.append({**row_from(done, {"system": "rlbench", **case}), "compile_cache": state})
    return rows


def peer_row(
    python: str,
    script: Path,
    algo: str,
    env_id: str,
    n_envs: int,
    gradient_steps: int,
    steps: int,
    qf: list[int],
    device: str = "cpu",
    policy: str = "MlpPolicy",
) -> Row:
    command = [
        python,
        str(script),
        "--algo",
        algo,
        "--env",
        env_id,
        "--n-envs",
        str(n_envs),
        "--gradient-steps",
        str(gradient_steps),
        "--steps",
        str(steps),
        *(["--policy", policy] if policy != "MlpPolicy" else []),
        "--qf",
        *map(str, qf),
    ]
    # The peer's JAX takes its default backend: hide the GPU for a CPU row, and keep it from
    # pre-allocating most of the GPU's memory for a GPU row (as rlbench's rows do not).
    env = {"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    done = run_child(command, env={**os.environ, **env})
    case = {"system": "peer", "algo": algo, "env": env_id, "n_envs": n_envs, "gradient_steps": gradient_steps, "qf": qf}
    case = {**({"policy": policy} if policy != "MlpPolicy" else {}), **case}
    return {**row_from(done, case), "device": device}


def machine() -> dict[str, Any]:
    """The machine line; XLA_FLAGS too when set, since they change what the rows measure."""
    info = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }
    if flags := os.environ.get("XLA_FLAGS", "").strip():
        info["xla_flags"] = flags
    return info


PRECISIONS = ("float32", "bfloat16")


FLAGS = (
    shared("env", default="HalfCheetah-v4", help=None),
    shared("peer"),
    flag(
        "--peer-script",
        type=Path,
        default=PEER_SCRIPT,
        help="the peer's benchmark script (default: ../shared/bench/sbx_speed.py beside the repository)",
    ),
    flag(
        "--case",
        nargs=4,
        action="append",
        metavar=("ALGO", "N_ENVS", "GRAD_STEPS", "STEPS"),
        help="override the cases, e.g. --case sac 1 1 3000 (critic widths from --qf)",
    ),
    flag("--qf", type=int, nargs="+", default=None, help="critic widths for --case rows"),
    shared(
        "algos",
        default=None,
        help="instead of --case: each algorithm's cases (off-policy: its DEFAULT_CASES, else 1 env x 1 gradient "
        "step; ppo, a2c, dqn and qrdqn: RL Zoo's entry for --env in hyperparams/<algo>.yml)",
    ),
    flag(
        "--steps",
        type=int,
        default=None,
        help="env steps timed in each --algos row (default: the case's; entry rows: 16 updates, rounded up to whole "
        "updates)",
    ),
    flag(
        "--peer-on-policy-script",
        type=Path,
        default=ENTRY_PEER_SCRIPT,
        help="the peer's benchmark script for ppo and dqn rows (default: benchmarks/sbx_entry_row_speed.py)",
    ),
    flag(
        "--policy",
        default="MlpPolicy",
        choices=tuple(POLICIES),
        help="the network family of every row, rlbench's and the --peer's (not with --n-seeds)",
    ),
    flag(
        "--precision",
        nargs="+",
        default=["float32"],
        choices=PRECISIONS,
        help="rlbench rows for each of these precisions (the peer runs float32)",
    ),
    flag("--repeats", type=int, default=1, help="alternate rlbench/peer rows this many times"),
    flag(
        "-params",
        "--hyperparams",
        dest="params",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="over the file entry of the ppo, a2c, dqn and qrdqn rows (theirs and the peer's), as train.py's -params",
    ),
    flag("--update-seconds", type=float, default=5.0, help="how long each row times the compiled update alone"),
    shared("device", help="JAX backend for rlbench rows: auto, cpu, gpu, or gpu:N (cuda:N) for the N-th GPU"),
    shared("peer_device", help="JAX backend for the peer's rows"),
    flag("--output", default=None, help="also write the rows as JSON lines here, each as soon as it is measured"),
    flag(
        "--first-step",
        action="store_true",
        help="measure the time to the first gradient step, cold and warm compilation cache, instead",
    ),
    shared("compile_cache", help="compilation cache of the rlbench rows (default as train.py's)"),
    flag(
        "--n-seeds",
        type=int,
        nargs="+",
        default=None,
        metavar="K",
        help="compare ways of packing K seeds (e.g. 1 2 4 8): vmapped in one process, pinned processes "
        "(and the --peer's), vmapped in two pinned processes",
    ),
    flag(
        "--packing",
        default="all",
        choices=("all", "vmapped"),
        help="with --n-seeds: every packing, or only K vmapped seeds in one process (a GPU)",
    ),
    flag("--one-row", default=None, help=argparse.SUPPRESS),  # internal: one case as JSON
    flag("--one-first-step", default=None, help=argparse.SUPPRESS),  # internal: likewise
)


def build_parser() -> argparse.ArgumentParser:
    return parser_from(FLAGS, prog="python -m rlbench.bench speed", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> int:
    """Stopped by SIGTERM or SIGINT, or ended in any way: the rows' and the peer's processes are killed."""
    with stopping_children():
        return measure(argv)


def measure(argv: list[str] | None = None) -> int:
    from rlbench.run import compile_cache
    from rlbench.run.device import select_device

    p = build_parser()
    args = p.parse_args(argv)
    cache = compile_cache.enable(args.compile_cache)
    if args.one_row is None and args.one_first_step is None:
        try:
            check_algos(p, args)
        except ConfigError as error:
            return exit_code(error)
    if args.n_seeds and args.policy != "MlpPolicy":
        p.error("--policy: only MlpPolicy with --n-seeds (the packing rows do not pass it on)")
    try:
        select_device(args.device, -1)
    except ConfigError as error:
        return exit_code(error)
    if args.one_row is not None:
        case = json.loads(args.one_row)
        row = entry_row(**case) if case["algo"] in ENTRY_ALGOS else rlbench_row(**case)
        print(json.dumps(row), flush=True)
        return 0
    if args.one_first_step is not None:
        print(json.dumps(first_step_row(**json.loads(args.one_first_step))), flush=True)
        return 0
    info = machine()
    if not args.first_step:  # the matrix-multiply peak is the throughput rows' yardstick only
        info["matmul_gflops"] = {
            "float32": matmul_peak_gflops(jnp.float32),
            "bfloat16": matmul_peak_gflops(jnp.bfloat16),
        }
    info["compile_cache"] = "fresh per case (cold, then warm)" if args.first_step else str(cache or "off")
    emit = Emitter(Path(args.output) if args.output else None)
    emit({"machine": info})
    rows = packing_cases(args) if args.n_seeds else throughput_cases(args, info.get("matmul_gflops"))
    for row in rows:
        emit(row)
    return 1 if emit.failed else 0


class Emitter:
    """Each row printed and kept at once (a run cut short keeps the rows it measured); `failed` once a row
    has an error."""

    def __init__(self, output: Path | None) -> None:
        self.output, self.failed = output, False
        if output is not None:
            output.write_text("")

    def __call__(self, row: Row) -> None:
        self.failed |= "error" in row
        print(json.dumps(row), flush=True)
        if self.output is not None:
            with self.output.open("a") as file:
                file.write(json.dumps(row) + "\n")


def packing_cases(args: argparse.Namespace) -> Iterator[Row]:
    """--n-seeds: each case's packings (packing_rows)."""
    peer = (args.peer, args.peer_script) if args.peer else None
    for algo, n_envs, gradient_steps, steps, qf in cases_from(args):
        case = {"algo": algo, "env_id": args.env, "n_envs": n_envs, "gradient_steps": gradient_steps, "qf": qf,
                "precision": args.precision[0]}  # fmt: skip
        yield from packing_rows(case, steps, args.n_seeds, args.device, peer, args.packing == "vmapped")


def throughput_cases(args: argparse.Namespace, matmul_gflops: dict[str, dict[str, float]] | None) -> Iterator[Row]:
    """Each case's rlbench rows (one per precision, --repeats times, each followed by the --peer's), or with
    --first-step its cold and warm rows; then the on-policy rows."""
    peak = {dtype: max(rates.values()) for dtype, rates in (matmul_gflops or {}).items()}
    yield from off_policy_rows(args, peak)
    yield from entry_rows(args)


def entry_rows(args: argparse.Namespace) -> Iterator[Row]:
    """Each --algos entry algorithm's rows on --env and its host twin, both with the twin's file entry (RL
    Zoo's files name gymnasium's ids), --repeats times, each followed by the --peer's on the twin. Their FLOP are
    not counted (rlbench.bench.entry_row): no fraction of the peak."""
    twin = host_twin(args.env)
    for algo in entry_algos(args):
        for _ in range(args.repeats):
            for env_id in (args.env, *([twin] if twin else [])):
                case = {"algo": algo, "env_id": env_id, "steps": args.steps, "update_seconds": args.update_seconds}
                yield rlbench_row_in_subprocess({**case, "entry_env": twin, "params": args.params}, args.device)
            if args.peer:
                yield entry_peer_row(
                    args.peer, args.peer_on_policy_script, algo, twin or args.env, args.steps, args.peer_device,
                    tuple(args.params),
                )  # fmt: skip


def off_policy_rows(args: argparse.Namespace, peak: dict[str, float]) -> Iterator[Row]:
    """The off-policy cases' rows (throughput_cases)."""
    for algo, n_envs, gradient_steps, steps, qf in cases_from(args):
        for _ in range(1 if args.first_step else args.repeats):
            for precision in args.precision:
                case = {"algo": algo, "env_id": args.env, "n_envs": n_envs, "gradient_steps": gradient_steps,
                        "qf": qf, "precision": precision, "policy": args.policy}  # fmt: skip
                if args.first_step:
                    yield from first_step_rows(case, args.device)
                    continue
                for env_id, vec_env in row_envs(args.env):
                    on_env = {**case, "env_id": env_id, **({"vec_env": vec_env} if vec_env != "dummy" else {})}
                    row = rlbench_row_in_subprocess(
                        {**on_env, "steps": steps, "update_seconds": args.update_seconds}, args.device
                    )
                    if "error" not in row:
                        row["peak_gflops"] = peak[precision]
                        row["fraction_of_peak"] = round(row["achieved_gflops"] / peak[precision], 3)
                    yield row
            if args.peer and not args.first_step:
                yield peer_row(
                    args.peer,
                    args.peer_script,
                    algo,
                    host_twin(args.env) or args.env,
                    n_envs,
                    gradient_steps,
                    steps,
                    qf,
                    args.peer_device,
                    args.policy,
                )


if __name__ == "__main__":
    sys.exit(main())
