"""The dependency rules: the pure core (algos, networks, buffers) never imports the host shell, and only the
command line (rlbench.cli) imports the command line or reads sys.argv."""

import ast
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
    "rlbench.loggers",
    "rlbench.runner",
    "rlbench.cli",
    "rlbench.envs",
    "rlbench.config",
    "rlbench.hyperparams",
    "rlbench.registry",
    "pickle",
)


# Modules outside rlbench/cli that are command lines themselves, each with what it may do and why.
CLI_IMPORTERS = {
    "bench/returns.py": "a front end of the sweep: builds its grid and run records with rlbench.cli.sweep's helpers",
    "sweep/__main__.py": "the `python -m rlbench.sweep` entry point (its command line is rlbench.cli.sweep)",
}
ARGV_READERS = {
    "bench/__main__.py": "the `python -m rlbench.bench` entry point",
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


def test_only_the_registry_names_an_algorithm():
    """Adding an algorithm touches its folder, the registry and its hyperparameter file: the rest of
    rlbench reaches algorithms only through the registry's `Algorithm` values and rlbench.algos.common."""
    algorithm_folders = [
        p.name for p in (PACKAGE / "algos").iterdir() if p.is_dir() and p.name not in ("common", "__pycache__")
    ]
    assert {"sac", "crossq", "tqc"} <= set(algorithm_folders)
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in PACKAGE.rglob("*.py")
        if not path.relative_to(PACKAGE).as_posix().startswith("algos/") and path.name != "registry.py"
        for name in sorted(imported_modules(path))
        if any(
            name == f"rlbench.algos.{algo}" or name.startswith(f"rlbench.algos.{algo}.") for algo in algorithm_folders
        )
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
