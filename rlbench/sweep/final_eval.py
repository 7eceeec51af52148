"""The evaluation at the end of a cell, for the report.

train.py (as RL Zoo) evaluates every `--eval-freq` env steps and not at the end, so a run shorter than
`--eval-freq` has no evaluation at all, and a longer one's last evaluation is up to `--eval-freq` steps old.
A finished cell whose last evaluation is not at its last env step has its final model evaluated once
more, as train.py's next evaluation would have been (the same episodes, deterministic, the eval env's next
seeds). The result goes to the manifest and the report, not into the run folder, which stays what its
command.txt writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlbench.experiment import Experiment
from rlbench.launch import model_name


def final_evaluation(exp: Experiment, run_dir: Path) -> dict[str, Any] | None:
    """{"env_steps": the run's last env step, "mean_return", "episodes"} of the final model in `run_dir`
    (a mean, not each episode's return: the manifest keeps a bounded size per cell); None when the run was
    evaluated at its last env step already."""
    from rlbench.checkpoint import read_checkpoint
    from rlbench.envs.make import close_vector_env, make_vector_env
    from rlbench.evaluation import evaluate
    from rlbench.policy import load_policy
    from rlbench.runner import EVAL_SEED_OFFSET

    run = exp.run
    checkpoint = read_checkpoint(run_dir / f"{model_name(exp)}.zip", load_replay_buffer=False)
    env_steps = int(checkpoint.manifest["counters"]["env_steps"])
    evaluated = checkpoint.arrays.get("host/eval_timesteps")
    n_evaluations = 0 if evaluated is None else len(evaluated)
    if n_evaluations and int(evaluated[-1]) == env_steps:
        return None
    seed = int(checkpoint.manifest["seed"])
    kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
    env = make_vector_env(run.env_id, run.n_eval_envs, "dummy", kwargs, run.env_wrappers, run.gym_packages)
    failed = True
    try:
        policy = load_policy(checkpoint, seed=seed)
        result = evaluate(policy, env, run.eval_episodes, seed=seed + EVAL_SEED_OFFSET + n_evaluations)
        failed = False
    finally:
        close_vector_env(env, failed)
    return {"env_steps": env_steps, "mean_return": result.mean, "episodes": len(result.returns)}


def final_evaluations(exp: Experiment, run_dirs: list[Path], codes: list[int]) -> list[dict[str, Any] | None]:
    """`final_evaluation` of each finished seed; a note in the log, and None, where it fails (the run itself
    is complete: only the report's last point is missing)."""
    found: list[dict[str, Any] | None] = []
    for code, run_dir in zip(codes, run_dirs, strict=True):
        try:
            found.append(final_evaluation(exp, run_dir) if code == 0 else None)
        except Exception as error:  # an env or a checkpoint that fails here must not fail the finished run
            print(
                f"note: no final evaluation of {run_dir} for the report ({type(error).__name__}: {error})", flush=True
            )
            found.append(None)
    return found
