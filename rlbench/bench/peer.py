"""The SBX peer of `bench returns --peer PYTHON`: the same grid trained by SBX through RL Zoo.

The peer is another virtual environment (`pip install sbx-rl rl_zoo3 "gymnasium[mujoco]"`); `probe_peer`
checks, before anything is written, that its Python has both installed (found, not imported: importing
RL Zoo imports torch, seconds; an install broken past that fails its cells, each with its log). The probe
and the peer's processes run in Python's isolated mode (`-I`: no current folder, PYTHONPATH or user site on
`sys.path`) in a folder of rlbench's (a fresh one; the cell's), so that what they find and run is the venv's
own, never a `sbx.py` or `rl_zoo3/` in the folder the benchmark was started from. Each cell
of the grid (algo, env, seed) gets its resolved rlbench entry translated to RL Zoo's format
(rlbench.bench.peer_hyperparams) and becomes one `PYTHON -m rl_zoo3.train` process with SBX's classes in RL
Zoo's algorithm table, the same seed, env steps and evaluation schedule (`--eval-freq`, `--eval-episodes`,
`--n-eval-envs`: RL Zoo divides the frequency by n_envs as rlbench does). They run once rlbench's cells
have, on this machine: as the sweep's CPU cells, one process per core, each pinned to a core no sweep task
holds (the sweep's lock file per core).

Each cell lives in `<sweep>/sbx/<cell>/`: `sbx.yml` (the entry), `peer.log` (the process's output), RL
Zoo's run folder `<zoo algo>/<env>_1/` and `peer_cell.json` (its outcome), written last. The same command
again skips the cells done and runs the others afresh. A cell is reported in one of four states: done,
failed (the end of its log), refused (a setting SBX cannot express, by name) or not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from rlbench.bench.children import finish_child, start_child, stopping_children
from rlbench.bench.peer_hyperparams import NAMED_ACTIVATIONS, PEER_DIFFERENCES, SBX_CLASSES, Untranslatable, peer_entry
from rlbench.envs.envpool_vector import task_id
from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, atomic_write_text, parse_json, read_bounded_text
from rlbench.redact import printable
from rlbench.report import plots
from rlbench.report.escaping import as_markdown
from rlbench.run.experiment import RunRequest, resolve
from rlbench.sweep.cores import lock_core
from rlbench.sweep.grid import Cell, SweepSpec, Task
from rlbench.types import VecEnvKind

SYSTEM = "sbx"
INSTALL = 'pip install sbx-rl rl_zoo3 "gymnasium[mujoco]"'
PROBE_TIMEOUT_S = 60
# Python's isolated mode for the probe and the peer: sys.path holds the peer's own installation only (the venv's
# site-packages, which the interpreter finds from its own path), not the working folder, PYTHONPATH or user site.
ISOLATED = ("-I",)
STATE_FILE = "peer_cell.json"
DONE, FAILED, REFUSED, NOT_RUN = "done", "failed", "refused", "not run"
# A cell's outcome as peer_cell.json holds it: {"state": one of the four, "wall_time_s", "run_dir" or "error"}
# (read back as untrusted JSON).
PeerOutcome = dict[str, Any]
# What the peer checks and answers: the modules it lacks, and the versions of those it has.
PROBE = """
import importlib.metadata as m, importlib.util as u, json, platform
wanted = {"sbx": "sbx-rl", "rl_zoo3": "rl_zoo3"}
missing = [name for name in wanted if u.find_spec(name) is None]
versions = {} if missing else {name: m.version(dist) for name, dist in wanted.items()}
print(json.dumps({"missing": missing, "versions": versions, "python": platform.python_version()}))
"""
# The peer's process: pinned to its core (argv[1], empty: unpinned) before anything starts a thread, SBX's
# classes put in RL Zoo's algorithm table (train.py and the experiment manager share the dict), then
# `python -m rl_zoo3.train` with the remaining arguments.
BOOTSTRAP = f"""
import os, runpy, sys
cores = [int(core) for core in sys.argv[1].split(",") if core]
if cores:
    os.sched_setaffinity(0, cores)
import sbx, rl_zoo3.utils, flax.linen
ACTIVATIONS = {{name: getattr(flax.linen, name) for name in {NAMED_ACTIVATIONS!r}}}
class NamedActivation(sbx.PPO):
    # SBX's PPO with policy_kwargs.activation_fn given by its flax name (an RL Zoo YAML entry can name no flax
    # function): the name is looked up in a fixed table, nothing is evaluated.
    def __init__(self, *args, policy_kwargs=None, **kwargs):
        name = (policy_kwargs or {{}}).get("activation_fn")
        if isinstance(name, str):
            policy_kwargs = {{**policy_kwargs, "activation_fn": ACTIVATIONS[name]}}
        super().__init__(*args, policy_kwargs=policy_kwargs, **kwargs)
classes = {{name: getattr(sbx, cls) for name, cls in {SBX_CLASSES!r}.items()}}
rl_zoo3.utils.ALGOS.update({{**classes, "ppo": NamedActivation}})
sys.argv = ["rl_zoo3.train", *sys.argv[2:]]
runpy.run_module("rl_zoo3.train", run_name="__main__", alter_sys=True)
"""


PeerDevice = Literal["cpu", "gpu"]  # --peer-device: JAX's backend in the peer


@dataclass(frozen=True)
class Peer:
    python: str
    versions: str  # as the report names them: "sbx 0.28.0, rl_zoo3 2.9.2, Python 3.11.7"
    device: PeerDevice = "cpu"  # JAX's backend in the peer


def probe_peer(python: str, device: PeerDevice = "cpu") -> Peer:
    """The peer at `python`, or ConfigError (exit 2) naming the path and what is missing."""
    hint = f"expected the python of a virtual environment with sbx and rl_zoo3 ({INSTALL})"
    given, python = python, os.path.abspath(python)  # the peer runs in a folder of its own; no symlink resolved:
    # a venv's python is a link to the base interpreter, and resolving it would leave the venv
    if not Path(python).is_file() or not os.access(python, os.X_OK):
        raise ConfigError(f"--peer {given}: not an executable file; {hint}")
    try:
        with tempfile.TemporaryDirectory(prefix="rlbench-peer-probe-") as empty:
            command = [python, *ISOLATED, "-c", PROBE]
            done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, cwd=empty)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        missing, versions = list(answer["missing"]), dict(answer["versions"])
    except subprocess.TimeoutExpired:
        raise ConfigError(f"--peer {given}: no answer within {PROBE_TIMEOUT_S} s; {hint}") from None
    except (OSError, ValueError, IndexError, KeyError, TypeError) as error:
        raise ConfigError(f"--peer {given}: not a Python that runs ({type(error).__name__}); {hint}") from None
    if missing:
        raise ConfigError(f"--peer {given}: cannot import {', '.join(map(str, missing))}; {hint}")
    named = ", ".join(f"{name} {version}" for name, version in versions.items())
    return Peer(python, f"{named}, Python {answer.get('python', '?')}", device)


# -- the cells -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerCell:
    cell: Cell
    folder: Path
    zoo_algo: str = ""
    entry: dict[str, Any] | None = None  # None: refused
    refusal: str = ""
    n_eval_envs: int = 1
    vec_env: VecEnvKind = "dummy"

    @property
    def env(self) -> str:
        """The env the peer trains on: gymnasium's of the same id for an EnvPool id (RL Zoo makes gymnasium's)."""
        return task_id(self.cell.env)

    @property
    def zoo_vec_env(self) -> str:
        return "subproc" if self.vec_env == "subproc" else "dummy"  # RL Zoo has no EnvPool


def plan_cells(spec: SweepSpec, template: RunRequest, sweep_folder: Path) -> list[PeerCell]:
    """Every cell of the grid with its RL Zoo entry, or the reason it has none. The entry is rlbench's
    resolved one (the file entry, -params, --params-for, -n), so both systems train the same settings."""
    # by Cell.group: (the RL Zoo algo, the entry), or why there is none
    entries: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[str, dict[str, Any]] | str] = {}
    cells = []
    for cell in spec.cells():
        if cell.group not in entries:
            request = dataclasses.replace(
                template, algo=cell.algo, env=cell.env, params=cell.params(spec), seed=cell.seed, n_seeds=1, verbose=0
            )
            try:
                entries[cell.group] = peer_entry(cell.algo, resolve(request).hyperparams)
            except Untranslatable as error:
                entries[cell.group] = str(error)
            except ConfigError as error:
                entries[cell.group] = f"rlbench refuses its entry: {error}"
        folder = sweep_folder / SYSTEM / Task((cell,)).id
        planned = entries[cell.group]
        if isinstance(planned, str):
            cells.append(PeerCell(cell, folder, refusal=planned))
        else:
            cells.append(PeerCell(cell, folder, *planned, n_eval_envs=template.n_eval_envs, vec_env=template.vec_env))
    return cells


def command(cell: PeerCell, peer: Peer, spec: SweepSpec, core: int | None) -> list[str]:
    assert cell.entry is not None, "a refused cell runs no process"
    return [
        peer.python,
        *ISOLATED,
        "-c",
        BOOTSTRAP,
        "" if core is None else str(core),
        *("--algo", cell.zoo_algo, "--env", cell.env, "-f", str(cell.folder.resolve())),
        *("--conf-file", str((cell.folder / "sbx.yml").resolve()), "--seed", str(cell.cell.seed)),
        *("-n", str(cell.entry["n_timesteps"]), "--eval-freq", str(spec.eval_freq)),
        *("--eval-episodes", str(spec.eval_episodes), "--n-eval-envs", str(cell.n_eval_envs)),
        *("--vec-env", cell.zoo_vec_env, "--device", "cpu"),  # (the torch device: SBX's learners are JAX's)
    ]


def peer_environment(device: PeerDevice) -> dict[str, str]:
    """The peer's JAX on the CPU, or on the GPU without pre-allocating most of its memory (as rlbench's)."""
    if device == "cpu":
        return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    return {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


# -- running them ----------------------------------------------------------------------------------


def run_cells(cells: Sequence[PeerCell], peer: Peer, spec: SweepSpec, on_event: Callable[[str], None] = print) -> None:
    """Run every translated cell not done yet, one process per core; a stop (SIGINT, SIGTERM) kills them."""
    todo = [c for c in cells if c.entry is not None and outcome(c)["state"] != DONE]
    slots = max(1, len(os.sched_getaffinity(0)))
    refused = sum(c.entry is None for c in cells)
    on_event(
        f"SBX peer ({peer.versions}): {len(todo)} of {len(cells)} cells to run, up to {slots} processes at a time "
        f"(one per core){f'; {refused} refused' if refused else ''}"
    )
    running: dict[subprocess.Popen[str], tuple[PeerCell, int | None, float]] = {}
    with stopping_children():
        while todo or running:
            while todo and len(running) < slots:
                cell = todo.pop(0)
                core, lock = claim_core()
                try:
                    running[start(cell, peer, spec, core)] = (cell, lock, time.monotonic())
                except OSError as error:  # the peer's Python gone since the probe, a folder not writable
                    release(lock)
                    on_event(f"{name(cell)}: {describe(record(cell, -1, 0.0, f'cannot start: {error}'))}")
                    continue
                on_event(f"{name(cell)}: started ({f'core {core}' if core is not None else 'unpinned'})")
            for process in [p for p in running if p.poll() is not None]:
                cell, lock, began = running.pop(process)
                finish_child(process)
                release(lock)
                on_event(f"{name(cell)}: {describe(record(cell, process.returncode, time.monotonic() - began))}")
            time.sleep(0.2)


def name(cell: PeerCell) -> str:
    return f"{SYSTEM} {cell.cell.algo} {cell.cell.env} seed {cell.cell.seed}"


def release(lock: int | None) -> None:
    if lock is not None:
        os.close(lock)


def start(cell: PeerCell, peer: Peer, spec: SweepSpec, core: int | None) -> subprocess.Popen[str]:
    """The cell's folder made afresh (an earlier attempt's files removed), its entry written, its process started."""
    shutil.rmtree(cell.folder, ignore_errors=True)
    cell.folder.mkdir(parents=True)
    atomic_write_text(cell.folder / "sbx.yml", yaml.safe_dump({cell.env: cell.entry}, sort_keys=True))
    log = cell.folder / "peer.log"
    return start_child(command(cell, peer, spec, core), peer_environment(peer.device), output=log, cwd=cell.folder)


def claim_core() -> tuple[int | None, int | None]:
    """(a core of this process's that no sweep task nor other peer process holds, its lock); (None, None) when
    every core is held."""
    for core in sorted(os.sched_getaffinity(0)):
        fd = lock_core(core)
        if fd is not None:
            return core, fd
    return None, None


def run_folder(cell: PeerCell) -> Path:
    """RL Zoo's run folder: the first of its algo and env in the cell's own log folder."""
    return cell.folder / cell.zoo_algo / f"{cell.env}_1"


def record(cell: PeerCell, code: int, seconds: float, error: str | None = None) -> PeerOutcome:
    """The cell's outcome, written last (peer_cell.json): done when its process ended well with evaluations."""
    evaluations = run_folder(cell) / "evaluations.npz"
    state: PeerOutcome = {"state": DONE, "wall_time_s": round(seconds, 1), "run_dir": str(run_folder(cell))}
    if error is None and code != 0:
        error = f"exit {code}: {log_tail(cell)}"
    elif error is None and not evaluations.exists():  # a run without evaluations has nothing to report
        error = f"no {evaluations}"
    if error is not None:
        state = {"state": FAILED, "wall_time_s": round(seconds, 1), "error": error}
    cell.folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(cell.folder / STATE_FILE, json.dumps(state))
    return state


def log_tail(cell: PeerCell, lines: int = 3) -> str:
    with contextlib.suppress(OSError, UntrustedFileError):
        text = read_bounded_text(cell.folder / "peer.log", 64 << 20)
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])
    return "no output"


def outcome(cell: PeerCell) -> PeerOutcome:
    """The cell's state: refused, its recorded outcome (read as untrusted input), or not run."""
    if cell.entry is None:
        return {"state": REFUSED, "error": cell.refusal}
    path = cell.folder / STATE_FILE
    try:
        state = parse_json(read_bounded_text(path, 1 << 20)) if path.exists() else {"state": NOT_RUN}
    except (OSError, UntrustedFileError) as error:
        return {"state": FAILED, "error": f"{path}: unreadable ({error})"}
    if not isinstance(state, dict) or state.get("state") not in (DONE, FAILED, NOT_RUN) or not recorded(state):
        return {"state": FAILED, "error": f"{path}: not a peer cell's outcome"}
    if state["state"] == DONE:
        state["run_dir"] = str(run_folder(cell))  # where it is, whatever the file says
    return state


def recorded(state: PeerOutcome) -> bool:
    """Its wall time and error as `record` writes them (a finite number >= 0, a string), which the report shows."""
    wall, error = state.get("wall_time_s", 0), state.get("error")
    number = isinstance(wall, int | float) and not isinstance(wall, bool) and math.isfinite(wall) and wall >= 0
    return number and (error is None or isinstance(error, str))


def describe(state: PeerOutcome) -> str:
    if state["state"] == DONE:
        return f"done in {state.get('wall_time_s', 0):.0f} s"
    # the error is peer_cell.json's text: one printable line on the console (no terminal escape codes)
    return f"{state['state']}" + (f": {printable(state['error'])}" if state.get("error") else "")


def not_done(cells: Sequence[PeerCell]) -> Iterator[str]:
    """`algo/env seed N (state: why)` for each cell without a finished run, for the report and the console."""
    for cell in cells:
        state = outcome(cell)
        if state["state"] != DONE:
            yield f"{cell.cell.algo}/{cell.cell.env} seed {cell.cell.seed} ({describe(state)})"


# -- the report ------------------------------------------------------------------------------------


def report_group(
    cells: Sequence[PeerCell], env: str, algo: str, log_folder: Path
) -> tuple[plots.Group | None, list[str]]:
    """The peer's finished runs of (env, algo) as a report group, labelled `sbx <algo>`, and their rows of the
    report's runs table (algo, env, seed, run folder, last eval at, final return, wall time)."""
    done: dict[Path, tuple[PeerCell, PeerOutcome]] = {}
    for cell in cells:
        if (cell.cell.env, cell.cell.algo) == (env, algo) and (state := outcome(cell))["state"] == DONE:
            done[Path(state["run_dir"])] = (cell, state)
    group = plots.load_group(env, algo, list(done), system=SYSTEM) if done else None
    if group is None:
        return None, []
    rows: list[str] = []
    for run, returns in zip(group.runs, group.returns, strict=True):
        cell, state = done[run]
        rows.append(
            f"| {group.label} | {env} | {cell.cell.seed} | {os.path.relpath(run, log_folder)} | "
            f"{int(group.timesteps[-1])} | {returns[-1]:.1f} | {float(state.get('wall_time_s', 0)):.0f} |"
        )
    return group, rows


def report_lines(cells: Sequence[PeerCell], peer: Peer | None) -> list[str]:
    """What the report says of the peer: what it is, and each cell without a finished run."""
    if not cells:
        return []
    named = as_markdown(peer.versions) if peer is not None else "not probed (--report-only)"  # the peer's answer
    lines = [
        f"Peer (`sbx <algo>` rows and curves): SBX through RL Zoo ({named}), each cell one `python -m "
        "rl_zoo3.train` run with the same seed, env steps and evaluation schedule and the same resolved "
        "hyperparameters in RL Zoo's format (`sbx.yml` in its folder).",
        "",
    ]
    for algo in dict.fromkeys(cell.cell.algo for cell in cells if cell.entry is not None):
        if algo in PEER_DIFFERENCES:  # what no setting can say: the comparison is read knowing it
            lines += [f"`sbx {algo}` differs where no setting says so: {PEER_DIFFERENCES[algo]}.", ""]
    missing = list(not_done(cells))
    if missing:
        lines += [f"SBX cells without a finished run: {as_markdown(', '.join(missing))}", ""]  # peer_cell.json's errors
    return lines
