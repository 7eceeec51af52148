"""The dependency rule: the pure core (algos, networks, buffers) never imports the host shell."""

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


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_imports_point_downward_only():
    offenders = []
    for folder in CORE:
        for path in (PACKAGE / folder).rglob("*.py"):
            for name in imported_modules(path):
                if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN):
                    offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, offenders


def test_no_eval_exec_or_pickle_anywhere():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} calls {node.func.id}")
        if "pickle" in imported_modules(path):
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
