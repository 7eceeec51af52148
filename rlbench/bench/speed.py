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

`--first-step` measures instead the time to the first gradient step (`first_grad_step_s`: building the
envs and learner, every compilation, the random warm-up, up to the end of the first update), cold (an
empty compilation cache) then warm (the cache the cold process filled), each in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.bench.children import finish_child, run_child, start_child, stopping_children
from rlbench.report.returns import cpu_model

PEER_SCRIPT = Path(__file__).resolve().parents[3] / "shared" / "bench" / "sbx_speed.py"
WARMUP_STEPS = 1000  # random phase (learning_starts), as the peer script
HALF_CHEETAH_SPEC = (17, 6)  # (obs_dim, action_dim), for the cost analysis without an env


def bench_config(algo: str, gradient_steps: int, qf: list[int], precision: str = "float32"):
    """The peer script's settings: each algorithm's defaults (DroQ and CrossQ presets included) with
    learning_starts 1000, train_freq 1, actor [256, 256] and the given critic widths."""
    from rlbench.algos.registry import ALGORITHMS
    from rlbench.config.hyperparams import merge

    spec = ALGORITHMS[algo]
    overrides = {
        "learning_starts": WARMUP_STEPS,
        "train_freq": 1,
        "gradient_steps": gradient_steps,
        "policy_kwargs": {"net_arch": {"pi": [256, 256], "qf": list(qf)}},
    }
    if precision != "float32":
        overrides["precision"] = precision
    if algo == "droq":
        overrides["policy_delay"] = gradient_steps
    return spec.build_config(merge(spec.preset, overrides), 1, "benchmark")


def matmul_peak_gflops(dtype=jnp.float32, repeats: int = 5) -> dict[str, float]:
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


def random_batches(spec, n_steps: int, batch_size: int):
    """[n_steps, batch_size, ...] transitions of random floats (actions in [-1, 1], none terminal)."""
    from rlbench.types import Transition

    rng = np.random.default_rng(0)
    shape = (n_steps, batch_size)
    return Transition(
        obs=jnp.asarray(rng.normal(size=(*shape, spec.obs_dim)), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, size=(*shape, spec.action_dim)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=shape), jnp.float32),
        next_obs=jnp.asarray(rng.normal(size=(*shape, spec.obs_dim)), jnp.float32),
        terminated=jnp.zeros(shape, jnp.float32),
    )


def gradient_step_gflop(learner, cfg, spec) -> float:
    """GFLOP of one gradient step as the loop runs it on average: the critic half every step, the
    actor and temperature half every `policy_delay` steps (XLA cost analysis, one batch)."""
    batch = jax.tree.map(lambda x: x[0], random_batches(spec, 1, cfg.batch_size))
    state = jax.eval_shape(learner.init_fn, jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(0)

    def flops(step) -> float:
        return jax.jit(step).lower(state, batch, key).compile().cost_analysis()["flops"]

    return (flops(learner.critic_step_fn) + flops(learner.actor_step_fn) / cfg.policy_delay) / 1e9


def update_only_rate(learner, cfg, spec, seconds: float = 5.0, n_seeds: int = 1) -> float:
    """Gradient steps/s (of all seeds) of the compiled fused steps alone, on fixed random batches; with
    `n_seeds` K, one vmapped call updates K learners, as a K-seed run does."""
    from rlbench.algos.common.seed_axis import SeedAxis

    axis = SeedAxis(n_seeds)
    g = cfg.gradient_steps
    batches = axis.stack([random_batches(spec, g, cfg.batch_size)] * n_seeds)
    keys = axis.stack([jax.random.split(jax.random.PRNGKey(1), g)] * n_seeds)
    state = axis.init(jax.jit(learner.init_fn), [jax.random.PRNGKey(seed) for seed in range(n_seeds)])
    progress = jnp.asarray(1.0)
    steps = jax.jit(axis.map(learner.gradient_steps_fn, shared_argnums=(3, 4)), donate_argnums=0)
    # The gradient steps done before each call decide, as in training, which of them update the actor.
    state, _ = steps(state, batches, keys, progress, 0)
    jax.block_until_ready(state)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        state, _ = steps(state, batches, keys, progress, (calls + 1) * g)
        calls += 1
    jax.block_until_ready(state)
    return calls * g * n_seeds / (time.perf_counter() - start)


def rlbench_row(
    algo: str,
    env_id: str,
    n_envs: int,
    gradient_steps: int,
    steps: int,
    qf: list[int],
    precision: str = "float32",
    update_seconds: float = 5.0,
    n_seeds: int = 1,
) -> dict:
    """Time `steps` env steps after 1000 random steps and 100 * n_envs training steps of warm-up, then the
    update alone for `update_seconds`. With `n_seeds` K, K vmapped seeds train together (`train_seeds`):
    the rates are for all seeds together, `per_seed_env_steps_per_s` for each."""
    from rlbench.algos.registry import ALGORITHMS
    from rlbench.config.entry import RunConfig
    from rlbench.loggers.base import MultiLogger
    from rlbench.loop.runner import SeedOutput, train_seeds
    from rlbench.types import EnvSpec

    cfg = bench_config(algo, gradient_steps, qf, precision)
    warmup = WARMUP_STEPS + 100 * n_envs
    marks: dict[str, float] = {}
    last: dict[str, float] = {}
    final_state = {}

    def on_iteration(env_steps: int, state) -> None:
        now = time.perf_counter()
        if env_steps > WARMUP_STEPS and "compile_s" not in marks:
            jax.block_until_ready(state)
            marks["compile_s"] = time.perf_counter() - last["time"]  # first update: compile + one step
        last["time"] = now
        if env_steps >= warmup and "start" not in marks:
            jax.block_until_ready(state)
            marks["start"], marks["start_steps"] = time.perf_counter(), env_steps
        if env_steps >= warmup + steps and "end" not in marks:
            jax.block_until_ready(state)
            marks["end"], marks["end_steps"] = time.perf_counter(), env_steps
            final_state["state"] = state

    run = RunConfig(env_id=env_id, n_timesteps=warmup + steps, n_envs=n_envs, eval_freq=-1, verbose=0, seed=0)
    last["time"] = time.perf_counter()
    outputs = [SeedOutput(lambda names: MultiLogger([])) for _ in range(n_seeds)]
    train_seeds(run, ALGORITHMS[algo], cfg, outputs, on_iteration=on_iteration)
    seconds = marks["end"] - marks["start"]
    timed = (marks["end_steps"] - marks["start_steps"]) * n_seeds  # env steps of all seeds
    grad_steps_per_s = timed / n_envs * gradient_steps / seconds
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    spec = EnvSpec(*HALF_CHEETAH_SPEC) if env_id == "HalfCheetah-v4" else None
    if spec is None:
        import gymnasium as gym

        probe = gym.make(env_id)
        spec = EnvSpec(int(np.prod(probe.observation_space.shape)), int(np.prod(probe.action_space.shape)))
        probe.close()
    learner = ALGORITHMS[algo].make_learner(cfg, spec)
    gflop = gradient_step_gflop(learner, cfg, spec)
    bare = update_only_rate(learner, cfg, spec, update_seconds, n_seeds)
    row = {
        **row_case(algo, env_id, n_envs, gradient_steps, qf, precision),
        **(
            {"n_seeds": n_seeds, "per_seed_env_steps_per_s": round(timed / n_seeds / seconds, 1)} if n_seeds > 1 else {}
        ),
        "env_steps_per_s": round(timed / seconds, 1),
        "grad_steps_per_s": round(grad_steps_per_s, 1),
        "compile_s": round(marks["compile_s"], 2),
        "update_only_grad_steps_per_s": round(bare, 1),
        "loop_efficiency": round(grad_steps_per_s / bare, 3),
        "gflop_per_grad_step": round(gflop, 4),
        "achieved_gflops": round(grad_steps_per_s * gflop, 1),
        "peak_rss_mib": round(peak_rss_mib, 1),
    }
    stats = jax.devices()[0].memory_stats() if jax.default_backend() == "gpu" else None
    if stats and "peak_bytes_in_use" in stats:
        row["peak_device_mib"] = round(stats["peak_bytes_in_use"] / 2**20, 1)
    return row


def first_step_row(
    algo: str, env_id: str, n_envs: int, gradient_steps: int, qf: list[int], precision: str = "float32"
) -> dict:
    """Seconds from nothing built to the end of the first gradient step: envs, learner, every compilation,
    the warm-up steps (random actions, no compilation), the first update."""
    from rlbench.algos.registry import ALGORITHMS
    from rlbench.config.entry import RunConfig
    from rlbench.loggers.base import MultiLogger
    from rlbench.loop.runner import train

    cfg = bench_config(algo, gradient_steps, qf, precision)
    start = time.perf_counter()
    first: dict[str, float] = {}

    def on_iteration(env_steps: int, state) -> None:
        if env_steps > WARMUP_STEPS and "end" not in first:
            jax.block_until_ready(state)
            first["end"] = time.perf_counter()

    run = RunConfig(env_id=env_id, n_timesteps=WARMUP_STEPS + n_envs, n_envs=n_envs, eval_freq=-1, verbose=0, seed=0)
    train(run, ALGORITHMS[algo], cfg, lambda names: MultiLogger([]), on_iteration=on_iteration)
    return {
        **row_case(algo, env_id, n_envs, gradient_steps, qf, precision),
        "first_grad_step_s": round(first["end"] - start, 2),
    }


def row_case(algo: str, env_id: str, n_envs: int, gradient_steps: int, qf: list[int], precision: str) -> dict:
    """The fields that say which case an rlbench row measured."""
    return {
        "system": "rlbench",
        "algo": algo,
        "env": env_id,
        "n_envs": n_envs,
        "gradient_steps": gradient_steps,
        "qf": qf,
        "precision": precision,
    }


def first_step_rows(case: dict, device: str) -> list[dict]:
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


def pinned_rows(commands: list[list[str]], cases: list[dict]) -> list[dict]:
    """Run the commands at once, command i pinned to core i (as `run_seeds.sh jobs=N` pins its runs): the
    JSON row each printed."""
    processes = [start_child(["taskset", "-c", str(core), *command]) for core, command in enumerate(commands)]
    return [row_from(finish_child(process), case) for process, case in zip(processes, cases, strict=True)]


def packing_rows(
    case: dict, steps: int, seed_counts: list[int], device: str, peer: tuple[str, Path] | None, vmapped_only: bool
):
    """How best to train K seeds of one case on this machine, for each K in `seed_counts`: K vmapped seeds
    in one process; K processes two at a time, each pinned to one core (`run_seeds.sh jobs=2`), for rlbench
    and the peer; K/2 vmapped seeds in each of two pinned processes. Aggregate env-steps/s counts every
    seed; per-seed env-steps/s is the aggregate over K (how fast each seed's training advances on average).
    Processes run two at a time, so their steady-state aggregate is that of two concurrent processes for
    every K >= 2 (measured once) and that of one pinned process for K = 1. `vmapped_only`: the first kind
    alone (on a GPU, where pinning processes to cores is beside the point). Yields rows as measured."""

    def per_seed_steps(n_seeds: int) -> int:  # about the same wall time for every row
        return max(steps // n_seeds, 100 * case["n_envs"])

    def summary(packing: str, n_seeds: int, measured: list[dict], system: str = "rlbench") -> dict:
        if any("error" in row for row in measured):
            return {**case, "system": system, "packing": packing, "n_seeds": n_seeds, "error": measured}
        total = sum(row["env_steps_per_s"] for row in measured)
        return {
            **case,
            "system": system,
            "packing": packing,
            "n_seeds": n_seeds,
            "env_steps_per_s": round(total, 1),
            "per_seed_env_steps_per_s": round(total / n_seeds, 1),
            "processes": [
                {key: row.get(key) for key in ("n_seeds", "env_steps_per_s", "compile_s", "peak_rss_mib")}
                for row in measured
            ],
        }

    for k in seed_counts:
        row = rlbench_row_in_subprocess(
            {**case, "steps": per_seed_steps(k), "update_seconds": 2.0, "n_seeds": k}, device
        )
        yield {**row, "packing": "one process, K vmapped seeds", "n_seeds": k}
    if vmapped_only:
        return
    one_row = [sys.executable, "-m", "rlbench.bench", "speed", "--device", device, "--one-row"]
    single = {**case, "steps": steps, "update_seconds": 0.5}
    concurrent = sorted({min(k, 2) for k in seed_counts})
    measured = {n: pinned_rows([[*one_row, json.dumps(single)]] * n, [case] * n) for n in concurrent}
    for k in seed_counts:
        yield summary("K processes, two at a time, pinned", k, measured[min(k, 2)])
    if peer is not None:
        python, script = peer
        flags = ["--algo", case["algo"], "--env", case["env_id"], "--n-envs", str(case["n_envs"])]
        flags += ["--gradient-steps", str(case["gradient_steps"]), "--steps", str(steps), "--qf", *map(str, case["qf"])]
        peer_measured = {n: pinned_rows([[python, str(script), *flags]] * n, [case] * n) for n in concurrent}
        for k in seed_counts:
            yield summary("K processes, two at a time, pinned", k, peer_measured[min(k, 2)], system="peer")
    for k in seed_counts:
        if k >= 2 and k % 2 == 0:
            half = {**case, "steps": per_seed_steps(k // 2), "update_seconds": 0.5, "n_seeds": k // 2}
            rows = pinned_rows([[*one_row, json.dumps(half)]] * 2, [case] * 2)
            yield summary("two pinned processes, K/2 vmapped seeds each", k, rows)


def rlbench_row_in_subprocess(case: dict, device: str) -> dict:
    """One row in a fresh interpreter: its compile time and peak memory are not shared with other rows."""
    command = [sys.executable, "-m", "rlbench.bench", "speed", "--device", device, "--one-row", json.dumps(case)]
    return row_from(run_child(command), {"system": "rlbench", **case})


def row_from(done: subprocess.CompletedProcess, case: dict) -> dict:
    """The JSON row a benchmark process printed last; for one that failed, the case with the end of its
    error output, so that one failing row does not cost the others (a GPU session has one try)."""
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    return {**case, "error": f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-3:])}


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
) -> dict:
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
        "--qf",
        *map(str, qf),
    ]
    # The peer's JAX takes its default backend: hide the GPU for a CPU row, and keep it from
    # pre-allocating most of the GPU's memory for a GPU row (as rlbench's rows do not).
    env = {"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    done = run_child(command, env={**os.environ, **env})
    case = {"system": "peer", "algo": algo, "env": env_id, "n_envs": n_envs, "gradient_steps": gradient_steps, "qf": qf}
    return {**row_from(done, case), "device": device}


def machine() -> dict:
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


DEFAULT_CASES = [  # (algo, n_envs, gradient_steps, steps timed, critic widths)
    ("sac", 1, 1, 3000, [256, 256]),
    ("sac", 8, 8, 4000, [256, 256]),
    ("droq", 1, 20, 300, [256, 256]),
    ("crossq", 1, 1, 1000, [1024, 1024]),
]
PRECISIONS = ("float32", "bfloat16")


def main(argv: list[str] | None = None) -> int:
    """Stopped by SIGTERM or SIGINT, or ended in any way: the rows' and the peer's processes are killed."""
    with stopping_children():
        return measure(argv)


def measure(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlbench.bench speed", description=__doc__.splitlines()[0])
    p.add_argument("--env", default="HalfCheetah-v4")
    p.add_argument("--peer", default=None, help="python of a venv with sbx-rl installed, to run SBX side by side")
    p.add_argument(
        "--peer-script",
        type=Path,
        default=PEER_SCRIPT,
        help="the peer's benchmark script (default: ../shared/bench/sbx_speed.py beside the repository)",
    )
    p.add_argument(
        "--case",
        nargs=4,
        action="append",
        metavar=("ALGO", "N_ENVS", "GRAD_STEPS", "STEPS"),
        help="override the cases, e.g. --case sac 1 1 3000 (critic widths from --qf)",
    )
    p.add_argument("--qf", type=int, nargs="+", default=None, help="critic widths for --case rows")
    p.add_argument(
        "--precision",
        nargs="+",
        default=["float32"],
        choices=PRECISIONS,
        help="rlbench rows for each of these precisions (the peer runs float32)",
    )
    p.add_argument("--repeats", type=int, default=1, help="alternate rlbench/peer rows this many times")
    p.add_argument(
        "--update-seconds", type=float, default=5.0, help="how long each row times the compiled update alone"
    )
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"), help="JAX backend for rlbench rows")
    p.add_argument("--peer-device", default="cpu", choices=("cpu", "gpu"), help="JAX backend for the peer's rows")
    p.add_argument(
        "--output", default=None, help="also write the rows as JSON lines here, each as soon as it is measured"
    )
    p.add_argument(
        "--first-step",
        action="store_true",
        help="measure the time to the first gradient step, cold and warm compilation cache, instead",
    )
    p.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR|none",
        help="compilation cache of the rlbench rows (default as train.py's)",
    )
    p.add_argument(
        "--n-seeds",
        type=int,
        nargs="+",
        default=None,
        metavar="K",
        help="compare ways of packing K seeds (e.g. 1 2 4 8): vmapped in one process, pinned processes "
        "(and the --peer's), vmapped in two pinned processes",
    )
    p.add_argument(
        "--packing",
        default="all",
        choices=("all", "vmapped"),
        help="with --n-seeds: every packing, or only K vmapped seeds in one process (a GPU)",
    )
    p.add_argument("--one-row", default=None, help=argparse.SUPPRESS)  # internal: one case as JSON
    p.add_argument("--one-first-step", default=None, help=argparse.SUPPRESS)  # internal: likewise
    args = p.parse_args(argv)

    from rlbench.run import compile_cache
    from rlbench.run.experiment import select_device

    cache = compile_cache.enable(args.compile_cache)

    if args.peer and not (Path(args.peer).exists() and args.peer_script.exists()):
        p.error(
            f"--peer {args.peer} / --peer-script {args.peer_script}: not found (both must exist to run SBX "
            "side by side; see ../shared/bench/README.md for the peer's venv)"
        )
    select_device(args.device, -1)
    if args.one_row is not None:
        case = json.loads(args.one_row)
        print(json.dumps(rlbench_row(**case)), flush=True)
        return 0
    if args.one_first_step is not None:
        print(json.dumps(first_step_row(**json.loads(args.one_first_step))), flush=True)
        return 0
    if args.case:
        cases = [
            (a, int(e), int(g), int(s), args.qf or [1024, 1024] if a == "crossq" else args.qf or [256, 256])
            for a, e, g, s in args.case
        ]
    else:
        cases = DEFAULT_CASES
    info = machine()
    if not args.first_step:  # the matrix-multiply peak is the throughput rows' yardstick only
        info["matmul_gflops"] = {
            "float32": matmul_peak_gflops(jnp.float32),
            "bfloat16": matmul_peak_gflops(jnp.bfloat16),
        }
        peak = {dtype: max(rates.values()) for dtype, rates in info["matmul_gflops"].items()}
    output = Path(args.output) if args.output else None
    if output is not None:
        output.write_text("")

    failed = False

    def emit(row: dict) -> None:  # printed and kept at once: a run cut short keeps the rows it measured
        nonlocal failed
        failed |= "error" in row
        print(json.dumps(row), flush=True)
        if output is not None:
            with output.open("a") as file:
                file.write(json.dumps(row) + "\n")

    info["compile_cache"] = "fresh per case (cold, then warm)" if args.first_step else str(cache or "off")
    emit({"machine": info})
    if args.n_seeds:
        peer = (args.peer, args.peer_script) if args.peer else None
        for algo, n_envs, gradient_steps, steps, qf in cases:
            case = {"algo": algo, "env_id": args.env, "n_envs": n_envs, "gradient_steps": gradient_steps, "qf": qf,
                    "precision": args.precision[0]}  # fmt: skip
            for row in packing_rows(case, steps, args.n_seeds, args.device, peer, args.packing == "vmapped"):
                emit(row)
        return 1 if failed else 0
    for algo, n_envs, gradient_steps, steps, qf in cases:
        for _ in range(1 if args.first_step else args.repeats):
            for precision in args.precision:
                case = {"algo": algo, "env_id": args.env, "n_envs": n_envs, "gradient_steps": gradient_steps,
                        "qf": qf, "precision": precision}  # fmt: skip
                if args.first_step:
                    for row in first_step_rows(case, args.device):
                        emit(row)
                    continue
                row = rlbench_row_in_subprocess(
                    {**case, "steps": steps, "update_seconds": args.update_seconds}, args.device
                )
                if "error" not in row:
                    row["peak_gflops"] = peak[precision]
                    row["fraction_of_peak"] = round(row["achieved_gflops"] / peak[precision], 3)
                emit(row)
            if args.peer and not args.first_step:
                emit(
                    peer_row(
                        args.peer, args.peer_script, algo, args.env, n_envs, gradient_steps, steps, qf, args.peer_device
                    )
                )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
