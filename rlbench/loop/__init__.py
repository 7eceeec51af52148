"""The training loop on the host and what falls due in it: acting, env steps, staging, the fused update
(runner), evaluations (evaluation), checkpoints (saving) and the divergence check (divergence_guard, divergence)."""
