"""Real Ray for the sweep tests: private temp folders and ports, and stopping only what a test started.

Ray's processes rename themselves (`ray::RuntimeEnvAgent`), so they are found as the process trees under
the ones whose command line names the test's own temp folder, never by name (other Ray users on the
machine, and other tests' Ray instances, are left alone).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))


def short_temp_dir() -> Path:
    """A temp folder with a short path: Ray's unix sockets live under it (at most 107 characters)."""
    return Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))


def ray_env(temp_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a Ray driver or node in a test: its own temp folder, token auth off (a local test
    cluster), quick node-death detection (a killed node is declared dead in about 2 s, not 15)."""
    return {
        **os.environ,
        "RAY_TMPDIR": str(temp_dir),
        "RAY_AUTH_MODE": "disabled",
        "RAY_health_check_period_ms": "500",
        "RAY_health_check_failure_threshold": "3",
        "RAY_usage_stats_enabled": "0",
        **extra,
    }


def processes_under(marker: str) -> list[psutil.Process]:
    """The processes whose command line contains `marker`, and all their descendants."""
    me = os.getpid()
    roots = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if process.pid != me and any(marker in part for part in process.info["cmdline"] or ()):
                roots.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    found = {process.pid: process for process in roots}
    for root in roots:
        try:
            found |= {child.pid: child for child in root.children(recursive=True)}
        except psutil.NoSuchProcess:
            continue
    return list(found.values())


def kill_all(processes: list[psutil.Process]) -> list[int]:
    killed = []
    for process in processes:
        try:
            process.kill()
            killed.append(process.pid)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(processes, timeout=10)
    return killed


class Cluster:
    """A head node and worker nodes on this machine, each `ray start`ed with its own temp folder and ports."""

    def __init__(self) -> None:
        self.root = short_temp_dir()
        self.address: str | None = None
        self.nodes: dict[str, Path] = {}
        self.env = ray_env(self.root)

    def start_head(self, num_cpus: int = 1) -> str:
        out = self._ray_start("head", "--head", "--port", "0", "--include-dashboard", "false", num_cpus=num_cpus)
        match = re.search(r"ray start --address='([0-9.]+:[0-9]+)'", out)
        assert match, out
        self.address = match.group(1)
        return self.address

    def add_worker(self, name: str, num_cpus: int = 1) -> None:
        assert self.address is not None
        self._ray_start(name, "--address", self.address, num_cpus=num_cpus)

    def _ray_start(self, name: str, *args: str, num_cpus: int) -> str:
        folder = self.root / name
        command = [RAY, "start", *args, "--num-cpus", str(num_cpus), "--temp-dir", str(folder)]
        out = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        self.nodes[name] = folder
        return out.stdout + out.stderr

    def node_processes(self, name: str) -> list[psutil.Process]:
        return processes_under(str(self.nodes[name]))

    def kill_node(self, name: str) -> list[int]:
        return kill_all(self.node_processes(name))

    def stop(self) -> None:
        kill_all(processes_under(str(self.root)))
        shutil.rmtree(self.root, ignore_errors=True)


def wait_until(condition, timeout: float, step: float = 0.2, what: str = "the condition", process=None):
    """condition()'s first true value, polled every `step` s. With `process` (a Popen whose output is piped), a
    process that exits first, or one still running at the deadline (then killed), fails with what it printed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"exit {process.returncode} while waiting for {what}:\n{process.communicate()[0]}")
        time.sleep(step)
    printed = ""
    if process is not None:
        process.kill()
        printed = f"; it printed:\n{process.communicate()[0]}"
    raise AssertionError(f"timed out after {timeout} s waiting for {what}{printed}")
