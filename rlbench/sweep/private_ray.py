"""The sweep's private Ray instance (no --address): reachable from this machine's loopback interface only,
its token and session folder readable by this user only, and nothing of it left running once the driver
is gone, even when the driver is killed.

- Loopback: Ray binds its servers (GCS, raylet, workers, agents, the autoscaler monitor) to the node's IP,
  and that IP is the loopback address when `ray_constants.ENABLE_RAY_CLUSTER` is off (its switch, the
  environment variable below, is how Ray keeps a local instance on macOS and Windows off the network).
  `ray.init(_node_ip_address="127.0.0.1")` does not do it: Ray replaces a loopback address by the
  machine's. The variable is read at import, and the driver has imported Ray by now, so the driver's
  copy of the constant is set too; the processes Ray starts read the variable.
- Folder and token: a fresh 0700 folder under RAY_TMPDIR (default /tmp) holds Ray's session folders (Ray
  makes its own temp root 0777, so that root is a subfolder) and a fresh token (0600) that every process
  of the instance reads through RAY_AUTH_TOKEN_PATH, instead of the persistent ~/.ray/auth_token that
  Ray would write world-readable. An explicit RAY_AUTH_MODE or RAY_AUTH_TOKEN of the user's is kept.
- Nothing left behind: a killed driver takes GCS and the raylet with it, but Ray's dashboard and
  runtime-env agents then wait a minute on the dead GCS (a 60 s publish of the raylet's death) before they
  exit. A reaper process, in its own session so that a Ctrl-C does not reach it, holds a pipe from the
  driver; when the pipe closes (the driver exited or was killed) it ends the instance's processes that
  are still alive and removes the folder. Ray's worker processes end by themselves within seconds. The
  reaper reads /proc (Linux); elsewhere there is none.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

from rlbench.errors import ConfigError, RunFailure

LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
# Nothing reads a private instance's metrics, and it sends no usage statistics.
QUIET = {"RAY_enable_metrics_collection": "0", "RAY_usage_stats_enabled": "0"}
TOKEN_FILE = "auth_token"
REAP_GRACE_S = 3.0

_token = secrets.token_hex(32)  # one per driver process: Ray's token loader keeps the first token it reads


class _Instance(TypedDict, total=False):
    """The running instance's folder, reaper and the settings it replaced (restored by `stop`)."""

    folder: Path
    saved_env: dict[str, str | None]
    saved_cluster: bool
    reaper: subprocess.Popen[str] | None


_instance: _Instance = {}


def start(ray: ModuleType, gpu: int | None = None, **settings: Any) -> None:
    """ray.init() of a private instance with `settings` (log_to_driver, ...), in a folder of its own; with
    `gpu`, the instance has that GPU only (the index among the GPUs this process sees)."""
    env = {**LOOPBACK_ONLY, **QUIET}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_gpu(gpu, os.environ.get("CUDA_VISIBLE_DEVICES"), count_gpus())
    folder = Path(tempfile.mkdtemp(prefix="rlbench-ray-", dir=os.environ.get("RAY_TMPDIR") or "/tmp"))
    if "RAY_AUTH_MODE" not in os.environ and "RAY_AUTH_TOKEN" not in os.environ:
        token = folder / TOKEN_FILE
        descriptor = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(_token)
        env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    from ray._private import ray_constants

    _instance.update(
        {
            "folder": folder,
            "saved_env": {key: os.environ.get(key) for key in env},
            "saved_cluster": ray_constants.ENABLE_RAY_CLUSTER,
        }
    )
    os.environ.update(env)
    ray_constants.ENABLE_RAY_CLUSTER = False
    refresh_ray_config()
    try:
        init(ray, folder, settings)
        _instance["reaper"] = start_reaper(folder)
    except BaseException:
        stop(ray)
        raise


def init(ray: ModuleType, folder: Path, settings: dict[str, Any]) -> None:
    """ray.init() of the instance, or RunFailure (exit 1) in one line where Ray's own start fails: its GCS or
    raylet not up within Ray's wait on a loaded machine, a raylet that died. Not 75: rlbench cannot tell such a
    passing overload from a node that never starts, and a script that reruns on 75 would rerun the latter forever."""
    try:
        ray.init(include_dashboard=False, _temp_dir=str(folder / "ray"), **settings)
    except Exception as error:  # Ray raises bare Exception and RuntimeError here, with 35 lines of traceback
        if Path("/proc/self/stat").exists():  # the processes it did start (a GCS still writing into the folder)
            end_processes(instance_processes(folder))
        reason = " ".join(str(error).split()) or "no reason given"
        raise RunFailure(
            f"Ray did not start on this machine ({type(error).__name__}: {reason}); nothing was trained: run the "
            "same command again, on a less loaded machine if Ray timed out"
        ) from None


def visible_gpu(index: int, visible: str | None, count: int | None) -> str:
    """CUDA_VISIBLE_DEVICES naming the `index`-th GPU of those `visible` (CUDA_VISIBLE_DEVICES, None: all
    `count` of the machine; count None: unknown), or ConfigError (exit 2) naming what there is."""
    ids = None if visible is None else [name.strip() for name in visible.split(",") if name.strip()]
    n_seen = len(ids) if ids is not None else count
    if ids is not None and count is not None:
        n_seen = min(len(ids), count)
    if n_seen is not None and index >= n_seen:
        where = f"CUDA_VISIBLE_DEVICES={visible} leaves" if ids is not None else "this machine has"
        valid = f"gpu:0 to gpu:{n_seen - 1}" if n_seen else "--device cpu/auto"
        raise ConfigError(f"--device gpu:{index}: {where} {n_seen} GPU{'s' * (n_seen != 1)}; use {valid}")
    return ids[index] if ids is not None else str(index)


def count_gpus() -> int | None:
    """The machine's NVIDIA GPUs as Ray counts them (NVML), None where Ray cannot say."""
    try:
        from ray._private.accelerators import get_accelerator_manager_for_resource

        manager = get_accelerator_manager_for_resource("GPU")
        assert manager is not None, "Ray's manager of NVIDIA GPUs"
        return int(manager.get_current_node_num_accelerators())
    except Exception:  # a Ray without this (private) helper: the cells' own check names a missing GPU
        return None


def stop(ray: ModuleType) -> None:
    """ray.shutdown(), then the reaper ends what is left and removes the folder; the settings come back."""
    ray.shutdown()
    reaper = _instance.pop("reaper", None)
    if reaper is not None:
        assert reaper.stdin is not None, "the reaper's stdin is a pipe"
        reaper.stdin.close()
        try:
            reaper.wait(timeout=30)
        except subprocess.TimeoutExpired:
            reaper.kill()
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = _instance.pop("saved_cluster", ray_constants.ENABLE_RAY_CLUSTER)
    for key, value in _instance.pop("saved_env", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    refresh_ray_config()
    if (folder := _instance.pop("folder", None)) is not None:
        shutil.rmtree(folder, ignore_errors=True)


def refresh_ray_config() -> None:
    """The driver's Ray reads its RAY_* settings (RAY_AUTH_MODE among them) once; Ray itself re-reads them
    this way when it turns token authentication on for a new local instance."""
    from ray._raylet import Config  # type: ignore[attr-defined]  # a Cython class ray's _raylet.pyi leaves out

    Config.initialize("")


def start_reaper(folder: Path) -> subprocess.Popen[str] | None:
    """The reaper, told the instance's processes (pid and start time): those under a process whose command
    line names the folder (GCS, the raylet and its agents, which rename themselves). None without /proc."""
    if not Path("/proc/self/stat").exists():
        return None
    listed = [f"{pid} {started}\n" for pid, started in instance_processes(folder)]
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    reaper = subprocess.Popen(
        [sys.executable, "-m", "rlbench.sweep.private_ray", str(folder)],
        stdin=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert reaper.stdin is not None, "stdin=PIPE"
    reaper.stdin.write("".join(listed))
    reaper.stdin.flush()
    return reaper


def instance_processes(folder: Path) -> list[tuple[int, int]]:
    """(pid, start time) of the instance's processes: those under a child of this process whose command line
    names the folder (GCS, the raylet and its agents, which rename themselves)."""
    children = process_tree()
    listed, todo = [], [pid for pid in children.get(os.getpid(), []) if str(folder) in command_line(pid)]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if (stat := process_stat(pid)) is not None:
            listed.append((pid, stat[1]))
    return listed


def reap(folder: Path) -> None:
    """The reaper's work: wait for the driver's pipe to close, end the listed processes still alive, remove
    the folder."""
    lines = [line.split() for line in sys.stdin.read().splitlines() if line.strip()]  # at EOF
    listed = [(int(pid), int(started)) for pid, started in lines]
    end_processes(listed)
    shutil.rmtree(folder, ignore_errors=True)


def end_processes(listed: list[tuple[int, int]]) -> None:
    """SIGTERM, then SIGKILL, to each (pid, start time) still alive (the same pid and start time: never a
    process that reused a pid), waiting up to REAP_GRACE_S after each."""

    def alive() -> list[int]:
        return [pid for pid, started in listed if (stat := process_stat(pid)) is not None and stat[1] == started]

    for number in (signal.SIGTERM, signal.SIGKILL):
        for pid in alive():
            with contextlib.suppress(OSError):
                os.kill(pid, number)
        deadline = time.monotonic() + REAP_GRACE_S
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)


def process_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process; None when it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return None if fields[0] in ("Z", "X") else (int(fields[1]), int(fields[19]))


def process_tree() -> dict[int, list[int]]:
    """Every process's children, by pid."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := process_stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
    return children


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reap(Path(sys.argv[1]))
