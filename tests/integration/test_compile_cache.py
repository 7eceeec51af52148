"""The persistent compilation cache (issue 19): where it is, that it really hits, that a warm run equals a cold
one bit for bit (RELIABILITY I1-I4), that two processes filling it at once are safe, and that a torn entry
is compiled again rather than fatal."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlbench.errors import ConfigError
from rlbench.run import compile_cache
from tests.conftest import REPO_ROOT

TINY = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "--seed",
    "5",
    "-n",
    "300",
    "--eval-freq",
    "-1",
    "-params",
    "learning_starts:100",
    "batch_size:16",
    "buffer_size:1000",
    "policy_kwargs:dict(net_arch=[16])",
]


def product_env(**extra: str) -> dict[str, str]:
    """This environment for a process of its own, with the product's bound on the cache (MAX_BYTES, hence
    JAX's eviction and its file lock): the test session leaves its own cache unbounded (tests/conftest.py)."""
    env = {name: value for name, value in os.environ.items() if name != compile_cache.MAX_SIZE_VAR}
    return {**env, "PYTHONPATH": REPO_ROOT, **extra}


def train_process(tmp_path: Path, cache: Path, name: str) -> subprocess.Popen:
    env = product_env(JAX_PLATFORMS="cpu")
    return subprocess.Popen(
        [sys.executable, "train.py", "-f", str(tmp_path / name), "--compile-cache", str(cache), *TINY],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return out + err


def learner_state(tmp_path: Path, name: str) -> bytes:
    (model,) = (tmp_path / name).rglob("Pendulum-v1.zip")
    with zipfile.ZipFile(model) as archive:
        return archive.read("state.msgpack")


def entries(cache: Path) -> set[str]:
    return {p.name for p in cache.glob("*-cache")}


def test_cache_folder_comes_from_flag_then_variable_then_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.resolve_cache_dir(None) == tmp_path / "xdg" / "rlbench" / "jax"
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "var"))
    assert compile_cache.resolve_cache_dir(None) == tmp_path / "var"
    assert compile_cache.resolve_cache_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    assert compile_cache.resolve_cache_dir("none") is None
    monkeypatch.setenv(compile_cache.ENV_VAR, "none")
    assert compile_cache.resolve_cache_dir(None) is None


INHERIT = """
import subprocess, sys
from rlbench.run import compile_cache
child = ("import jax; c = jax.config; print(c.jax_compilation_cache_dir, "
         "c.jax_persistent_cache_min_compile_time_secs, c.jax_compilation_cache_max_size)")
for choice in sys.argv[1:]:
    compile_cache.enable(choice)
    print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip())
"""


def test_processes_started_after_enable_inherit_the_cache(tmp_path):
    """Tuning workers are spawned interpreters: they must use the cache without code of their own. (In a
    process of its own: enable() changes the process's JAX configuration.)"""
    done = subprocess.run(
        [sys.executable, "-c", INHERIT, str(tmp_path / "cache"), "none"],
        env=product_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    on, off = done.stdout.splitlines()
    assert on.split() == [str(tmp_path / "cache"), "0.0", str(compile_cache.MAX_BYTES)]
    assert off.split()[0] == "None"
    bounded = subprocess.run(
        [sys.executable, "-c", INHERIT, str(tmp_path / "cache")],
        env=product_env(JAX_COMPILATION_CACHE_MAX_SIZE="1000000"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert bounded.stdout.split() == [str(tmp_path / "cache"), "0.0", "1000000"]  # JAX's own variable wins


def test_a_folder_others_can_write_to_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # the umask may have removed the group and other write bits
    with pytest.raises(ConfigError, match="other users can write to it"):
        compile_cache.enable(str(shared))


def test_two_cold_processes_fill_one_cache_at_once_then_a_warm_run_hits_and_is_bit_identical(tmp_path):
    """Two cold processes fill one cache at once: both succeed, with the same learner. A warm run then hits
    every entry they wrote (they are whole: no new one) and, with a run at once that has no cache at all,
    ends bit-identical to them (RELIABILITY I1-I4). Four train.py processes, where two tests took five."""
    cache = tmp_path / "cache"
    first, second = train_process(tmp_path, cache, "cold-a"), train_process(tmp_path, cache, "cold-b")
    out = finish(first)
    finish(second)
    assert f"Compilation cache: {cache}" in out
    cold_entries = entries(cache)
    assert any(name.startswith("jit_update_then_act") for name in cold_entries), cold_entries
    cold = learner_state(tmp_path, "cold-a")
    assert learner_state(tmp_path, "cold-b") == cold

    warm, off = train_process(tmp_path, cache, "warm"), train_process(tmp_path, Path("none"), "off")
    finish(warm), finish(off)
    assert entries(cache) == cold_entries  # every compilation of the warm run was a hit
    assert learner_state(tmp_path, "warm") == cold
    assert learner_state(tmp_path, "off") == cold
    assert not (Path(REPO_ROOT) / "none").exists()


def test_torn_or_foreign_entries_are_compiled_again_not_fatal(tmp_path):
    cache = tmp_path / "cache"
    finish(train_process(tmp_path, cache, "cold"))
    for i, entry in enumerate(sorted(cache.glob("*-cache"))):
        data = entry.read_bytes()  # half of them torn (a killed writer), half foreign bytes
        entry.write_bytes(data[: len(data) // 2] if i % 2 else b"not an executable of this jaxlib" * 10)
    out = finish(train_process(tmp_path, cache, "after"))
    assert "Error reading persistent compilation cache entry" in out  # JAX's warning: reported, then compiled
    assert learner_state(tmp_path, "after") == learner_state(tmp_path, "cold")


def world_writable(folder: Path, mode: int = 0o777) -> Path:
    folder.mkdir()
    folder.chmod(mode)  # chmod, not mkdir's mode: the umask would remove the group and other write bits
    return folder


def test_a_private_folder_under_a_folder_others_can_write_to_is_refused_before_anything_is_created(tmp_path):
    """Issue 32 item 10: the cache is private, but its parent is world-writable (not sticky): another user
    could rename it away and put theirs in its place. Refused, naming the parent; a missing cache folder is not
    created there; train.py says it in one line, first, with exit 2 and nothing written."""
    shared = world_writable(tmp_path / "shared")
    (shared / "cache").mkdir(mode=0o700)
    with pytest.raises(ConfigError, match=f"the folder above it {shared} can be written by other users"):
        compile_cache.enable(str(shared / "cache"))
    with pytest.raises(ConfigError, match="mode 0o777, not sticky"):
        compile_cache.enable(str(shared / "new" / "cache"))
    assert not (shared / "new").exists()
    done = subprocess.run(
        [sys.executable, "train.py", "-f", str(tmp_path / "logs"), "--compile-cache", str(shared / "cache"), *TINY],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.startswith(f"error: --compile-cache {shared / 'cache'}: the folder above it {shared}")
    assert len(done.stderr.splitlines()) == 1 and not (tmp_path / "logs").exists()


SWAP = """
import os, sys
from pathlib import Path
import jax, jax.numpy as jnp
from rlbench.run import compile_cache
sticky, xdg = Path(sys.argv[1]), Path(sys.argv[2])
cache = sticky / "cache"
assert compile_cache.enable(str(cache)) == cache  # under a sticky folder (as /tmp): accepted, and created private
assert oct(cache.stat().st_mode & 0o777) == "0o700", oct(cache.stat().st_mode)
print(jax.config.jax_compilation_cache_dir, os.environ["JAX_COMPILATION_CACHE_DIR"])
cache.rename(sticky / "moved")  # another user's swap: the checked folder renamed away, a writable one in its place
cache.mkdir()
cache.chmod(0o777)
jax.jit(lambda x: x * 2 + 1)(jnp.ones(3)).block_until_ready()
print(len(list(cache.iterdir())), len(list((sticky / "moved").glob("*-cache"))))
os.environ.pop(compile_cache.ENV_VAR)
os.environ["XDG_CACHE_HOME"] = str(xdg)
print(compile_cache.enable(None))
"""


def test_the_checked_folder_is_the_one_used_for_the_whole_run_even_when_swapped(tmp_path):
    """Issue 32 item 10: the folder is held open and JAX works in it through /proc/self/fd, so a folder swapped
    in under its name after the check gets nothing, and the checked one every entry; a sticky parent (as /tmp)
    is accepted; the default folder under a world-writable XDG_CACHE_HOME turns the cache off with a warning."""
    sticky = world_writable(tmp_path / "sticky", 0o1777)
    xdg = world_writable(tmp_path / "xdg")
    done = subprocess.run(
        [sys.executable, "-c", SWAP, str(sticky), str(xdg)],
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pinned, exported, swapped, checked, off = done.stdout.split()
    assert pinned.startswith("/proc/self/fd/") and exported == str(sticky / "cache")  # children get the real path
    assert swapped == "0" and int(checked) >= 1
    assert off == "None" and f"Warning: compilation cache off (compilation cache {xdg / 'rlbench' / 'jax'}" in (
        done.stderr
    )
    assert f"the folder above it {xdg} can be written by other users" in done.stderr
    assert not (xdg / "rlbench").exists()
