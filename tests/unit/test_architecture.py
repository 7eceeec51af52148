"""The dependency rules: the pure core (algos, networks, buffers) never imports the host shell, the shell's
packages import in the order of a run's stages only, and only the command lines import rlbench.cli or read
sys.argv."""

import ast
import dataclasses
import os
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = Path(REPO_ROOT) / "rlbench"
CORE = ("algos", "networks", "buffers")
FORBIDDEN = (
    "gymnasium",
    "yaml",
    "wandb",
    "optuna",
    "rich",
    "pickle",
    *(f"rlbench.{package}" for package in ("envs", "config", "store", "loggers", "loop", "run", "report")),
    *(f"rlbench.{package}" for package in ("tuning", "cli", "sweep", "bench")),
)
# The packages of rlbench in the order of a run: a module imports its own package and those ranked below
# it, never one ranked at or above (no cycle, no import against the order of a run). Leaves first, then
# the core, then the shell's stages, then the front ends. The front ends are ordered too, each building
# on those before it: train.py's -optimize runs trials (tuning), a sweep's cell is a train.py command
# line (its args.yml and command.txt are train.py's, so the sweep uses train.py's parser), and `bench
# returns` runs a sweep.
STAGES = (
    ("errors", "files", "types", "redact", "connectivity", "__init__"),  # leaves: no rlbench import
    ("networks", "buffers"),
    ("algos",),  # the learners' math: configs as typed values, no file spelling
    ("envs",),  # gymnasium envs, their wrappers, replay on resume, observation normalization
    ("config",),  # text to typed settings; each algorithm's keys, and the registry that names every algorithm
    ("store",),  # the checkpoint format
    ("loggers",),
    ("loop",),  # the training loop and what falls due in it
    ("run",),  # a request resolved, checked and launched
    ("report",),  # curves, tables and statistics of finished runs
    ("tuning",),
    ("cli",),  # train.py and enjoy.py
    ("sweep",),
    ("bench",),
)
RANK = {package: rank for rank, packages in enumerate(STAGES) for package in packages}


# Modules outside rlbench/cli that are command lines themselves, each with what it may do and why.
CLI_IMPORTERS = {
    "sweep/command.py": "the sweep's command line: each cell is a train.py command line, recorded with its parser",
    "bench/speed.py": "`bench speed`'s command line: its shared flags come from rlbench.cli.flags",
    "bench/returns.py": "`bench returns`' command line: its shared flags come from rlbench.cli.flags",
}
ARGV_READERS = {
    "bench/__main__.py": "the `python -m rlbench.bench` entry point",
    "sweep/command.py": "the sweep's command line (`python -m rlbench.sweep`, `rlbench-sweep`)",
    "sweep/private_ray.py": "its reaper runs as a process of its own (`python -m`), whose argument is the folder",
    "loggers/tracking.py": "masks sys.argv while wandb.init reads it: W&B records it, and no W&B setting replaces it",
}
# The one module that may import pickle, and why: Optuna's CMA-ES sampler unpickles a state stored in each trial
# of a study; rlbench unpickles those bytes first with an Unpickler that allows only CMA-ES's and numpy's classes,
# so a forged study is refused instead of running code. Nothing rlbench writes is a pickle.
PICKLE_IMPORTERS = {"tuning/stored.py"}


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at module level or inside a function; `from a import b` adds a and a.b."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def outside_the_cli(allowed: dict[str, str]) -> list[tuple[str, Path]]:
    """(path relative to rlbench/, path) of each module outside rlbench/cli, but those `allowed`."""
    paths = ((path.relative_to(PACKAGE).as_posix(), path) for path in PACKAGE.rglob("*.py"))
    return [(relative, path) for relative, path in paths if not relative.startswith("cli/") and relative not in allowed]


def test_core_imports_point_downward_only():
    offenders = []
    for folder in CORE:
        for path in (PACKAGE / folder).rglob("*.py"):
            for name in imported_modules(path):
                if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN):
                    offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, offenders


def test_every_package_imports_in_the_order_of_a_run():
    """No import cycle between packages and none against the stages (`python -m` entry points aside)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        own = relative.with_suffix("").parts[0]
        assert own in RANK, f"{relative}: a package or root module STAGES does not place"
        if path.name == "__main__.py":
            continue
        for name in imported_modules(path):
            parts = name.split(".")
            if parts[0] != "rlbench" or len(parts) == 1 or parts[1] == own or parts[1] == "__version__":
                continue
            if parts[1] not in RANK:
                continue  # `from rlbench.x import name`: also listed as rlbench.x.name
            if RANK[parts[1]] >= RANK[own]:
                offenders.append(f"{relative} imports {name}")
    assert not offenders, offenders


def test_the_root_holds_leaves_only():
    """A new module finds its stage's package: the root keeps the leaves STAGES lists first."""
    roots = {path.stem for path in PACKAGE.glob("*.py")}
    assert roots <= set(STAGES[0]), sorted(roots - set(STAGES[0]))


# Folders of rlbench/algos that are not one algorithm's: what several share, and a family's math (the soft
# family's learner, acting and temperature: SAC, DroQ, TQC, CrossQ).
SHARED_FOLDERS = ("common", "soft", "__pycache__")


def algorithm_folders() -> list[str]:
    return [p.name for p in (PACKAGE / "algos").iterdir() if p.is_dir() and p.name not in SHARED_FOLDERS]


def imports_an_algorithm_folder(name: str, folders: list[str], own: str | None = None) -> bool:
    return any(
        name == f"rlbench.algos.{algo}" or name.startswith(f"rlbench.algos.{algo}.") for algo in folders if algo != own
    )


def names_an_algorithm_it_may_not(relative: str, name: str, folders: list[str]) -> bool:
    """An algorithm's folder imports only itself (and algos/common); its keys' module
    (config/algorithms/<algo>.py) only its own folder; no other module any folder."""
    parts = relative.removesuffix(".py").split("/")
    own = parts[1] if parts[0] == "algos" else parts[2] if parts[:2] == ["config", "algorithms"] else None
    return imports_an_algorithm_folder(name, folders, own=own)


def test_an_algorithm_is_named_only_by_its_folder_and_its_keys():
    """Adding an algorithm touches its folder (the math), its keys' module in config/algorithms (RL Zoo's
    spelling, preset and the Algorithm value), the registry's list, its hyperparameter file and its tests:
    the rest of rlbench (rlbench/algos/common and algos/soft included) reaches algorithms only through
    `Algorithm` values."""
    folders = algorithm_folders()
    assert {"sac", "crossq", "tqc", "td3", "ppo"} <= set(folders)
    offenders = [
        f"{relative} imports {name}"
        for path in PACKAGE.rglob("*.py")
        for name in sorted(imported_modules(path))
        if names_an_algorithm_it_may_not(relative := path.relative_to(PACKAGE).as_posix(), name, folders)
    ]
    assert not offenders, offenders
    keys_modules = {path.stem for path in (PACKAGE / "config" / "algorithms").glob("*.py")}
    assert set(folders) <= keys_modules, sorted(set(folders) - keys_modules)  # each folder has its keys' module


def test_the_learners_hold_no_file_spelling():
    """RL Zoo's text (key sets, value parsing, presets in the file format) is the boundary's (rlbench/config):
    no module of rlbench/algos names a hyperparameter file key set, a preset or a parser of file values."""
    markers = ("KeySet", "_PRESET", "policy_kwargs", "parse_", "build_config", "config_to_hyperparams")
    offenders = [
        f"{path.relative_to(PACKAGE)}: {marker}"
        for path in (PACKAGE / "algos").rglob("*.py")
        for marker in markers
        if marker in path.read_text()
    ]
    assert not offenders, offenders


def test_no_algorithm_folder_imports_another():
    """What two algorithms share lives in rlbench/algos/common (or their family's folder, algos/soft), so each
    algorithm's folder stands alone (checked on its own so that a failure says which rule broke)."""
    folders = algorithm_folders()
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for algo in folders
        for path in (PACKAGE / "algos" / algo).rglob("*.py")
        for name in sorted(imported_modules(path))
        if imports_an_algorithm_folder(name, folders, own=algo)
    ]
    assert not offenders, offenders


def test_the_learners_hold_no_search_space():
    """RL Zoo's Optuna spaces are the boundary's (rlbench/tuning/search_spaces), joined to the learners by name."""
    offenders = [
        str(path.relative_to(PACKAGE)) for path in (PACKAGE / "algos").rglob("*.py") if "suggest_" in path.read_text()
    ]
    assert not offenders, offenders


def algorithm_specific_fields() -> set[str]:
    """The config fields some algorithms have and the shared base (ActorCriticConfig) has not."""
    from rlbench.algos.common.config import ActorCriticConfig
    from rlbench.config.registry import ALGORITHMS

    shared = {f.name for f in dataclasses.fields(ActorCriticConfig)}
    configs = [algo.build_config(algo.preset, 1, "test") for algo in ALGORITHMS.values()]
    return {f.name for cfg in configs for f in dataclasses.fields(cfg)} - shared


def test_the_shell_reads_no_algorithm_specific_config_field():
    """Outside the core, a config is read through its shared fields only (the loop's schedule, the memory
    estimate, the resume guard): what one algorithm alone has (gSDE, the temperature, quantiles, action
    noise) is asked of its `Algorithm` (acting, architecture_keys, the learner's estimates). Only each
    algorithm's keys' module (config/algorithms/) reads and writes its own fields."""
    specific = algorithm_specific_fields()
    assert {"gsde", "ent_coef", "target_entropy", "quantiles"} <= specific
    offenders = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} reads .{node.attr}"
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in CORE
        and path.relative_to(PACKAGE).parts[:2] != ("config", "algorithms")  # each algorithm's own keys
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in specific
    ]
    assert not offenders, offenders


def test_only_the_command_line_imports_rlbench_cli():
    offenders = [
        f"{relative} imports {name}"
        for relative, path in outside_the_cli(CLI_IMPORTERS)
        for name in sorted(imported_modules(path))
        if name == "rlbench.cli" or name.startswith("rlbench.cli.")
    ]
    assert not offenders, offenders


def reads_sys_argv(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "argv" and isinstance(node.value, ast.Name) and node.value.id == "sys"
    return isinstance(node, ast.ImportFrom) and node.module == "sys" and "argv" in {a.name for a in node.names}


def test_only_the_command_line_reads_sys_argv():
    offenders = [
        f"{relative}:{node.lineno} reads sys.argv"
        for relative, path in outside_the_cli(ARGV_READERS)
        for node in ast.walk(ast.parse(path.read_text()))
        if reads_sys_argv(node)
    ]
    assert not offenders, offenders


def test_no_eval_exec_or_pickle_anywhere():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} calls {node.func.id}")
        if "pickle" in imported_modules(path) and str(path.relative_to(PACKAGE)) not in PICKLE_IMPORTERS:
            offenders.append(f"{path.relative_to(PACKAGE)} imports pickle")
    assert not offenders, offenders


def test_importing_rlbench_turns_off_gpu_memory_preallocation_unless_set():
    import subprocess
    import sys

    code = "import os, rlbench; print(os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'])"
    env = {k: v for k, v in os.environ.items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "false"
    )
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "true"
    )
