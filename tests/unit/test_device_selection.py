"""rlbench.run.device: how a process's CPU backend runs its computations (read once, when the backend starts,
hence a fresh process for each case)."""

import subprocess
import sys

from tests.conftest import REPO_ROOT

# A program of about a second on the CPU; whether its result is ready when the call returns says where it ran.
PROGRAM = """
import jax, jax.numpy as jnp
{setup}
program = jax.jit(lambda x: jax.lax.fori_loop(0, 2000, lambda _, m: jnp.tanh(m @ m) * 0.5, x))
x = jnp.full((256, 256), 0.01, jnp.float32)
program(x).block_until_ready()
print(program(x).is_ready())
"""


def ready_when_the_call_returns(setup: str) -> bool:
    code = PROGRAM.format(setup=setup)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] == "True"


def test_inline_cpu_calls_run_each_computation_on_the_calling_thread():
    """PPO's and A2C's per-step acting calls skip the hand-off to a worker thread: the call returns with its
    result. Without the option, JAX's default hands it off and returns at once (the check can fail)."""
    select = "from rlbench.run.device import select_device; select_device('cpu', -1{})"
    assert ready_when_the_call_returns(select.format(", inline_cpu_calls=True"))
    assert not ready_when_the_call_returns(select.format(""))


def test_on_policy_algorithms_ask_for_inline_calls():
    from rlbench.config.registry import get_algo

    assert [name for name in ("ppo", "a2c", "sac", "td3", "dqn") if get_algo(name).inline_cpu_calls] == ["ppo", "a2c"]
