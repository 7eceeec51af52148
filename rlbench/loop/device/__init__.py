"""The device loop: training on JAX-native environments (rlbench.envs.jax_native) with acting, env steps,
buffer inserts and the fused update of every seed and env in one compiled `lax.scan` per chunk of vector
steps (program.py); the host wakes between chunks only for what falls due (driver.py: evaluation, logs,
checkpoints, the finiteness check, signals). runner.py builds a run as rlbench.loop.runner does for the host
loop, with the same outputs, checkpoints and result."""
