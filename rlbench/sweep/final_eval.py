"""The evaluation at the end of a cell, for the report.

train.py evaluates every `--eval-freq` env steps, so a run shorter than `--eval-freq` has no scheduled
evaluation at all, and a longer one's last is up to `--eval-freq` steps old. A finished cell whose last
evaluation is not at its last env step has its final model evaluated once more, as the loop's next
evaluation would have been (rlbench.run.final_eval, which train.py also runs at its end). The result goes
to the manifest and the report; the cell's run folder keeps its scheduled evaluations only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlbench.config import hyperparams
from rlbench.config.literals import LiteralError, parse_key_values
from rlbench.errors import ConfigError
from rlbench.run.experiment import Experiment
from rlbench.run.outputs import model_name
from rlbench.sweep.grid import Cell, SweepSpec

if TYPE_CHECKING:
    from rlbench.run.final_eval import FinalEval


def final_evaluation(exp: Experiment, run_dir: Path) -> FinalEval | None:
    """{"env_steps": the run's last env step, "mean_return", "episodes"} of the final model in `run_dir`
    (a mean, not each episode's return: the manifest keeps a bounded size per cell); None when the run was
    evaluated at its last env step already."""
    from rlbench.run.final_eval import final_eval_record, final_model_evaluation
    from rlbench.store.checkpoint import read_checkpoint

    checkpoint = read_checkpoint(run_dir / f"{model_name(exp)}.zip", load_replay_buffer=False)
    result = final_model_evaluation(exp.run, checkpoint)
    return None if result is None else final_eval_record(checkpoint.manifest.counters.env_steps, result)


def final_evaluations(exp: Experiment, run_dirs: list[Path], codes: list[int]) -> list[FinalEval | None]:
    """`final_evaluation` of each finished seed; a note in the log, and None, where it fails (the run itself
    is complete: only the report's last point is missing)."""
    found: list[FinalEval | None] = []
    for code, run_dir in zip(codes, run_dirs, strict=True):
        try:
            found.append(final_evaluation(exp, run_dir) if code == 0 else None)
        except Exception as error:  # an env or a checkpoint that fails here must not fail the finished run
            print(
                f"note: no final evaluation of {run_dir} for the report ({type(error).__name__}: {error})", flush=True
            )
            found.append(None)
    return found


def short_runs_note(spec: SweepSpec) -> str | None:
    """The sweep's note at its start when some runs are shorter than --eval-freq (train.py evaluates none of
    them), None when none is. A run's length is -n, else its -params n_timesteps, else its hyperparameter
    file entry's (a YAML file; a .py file's code runs in its cells only, so its lengths are not known here)."""
    lengths: dict[str, int] = {}
    tables: dict[str, dict[str, Any] | None] = {}
    for cell in spec.cells():
        name = f"{cell.algo} {cell.env}{''.join(f' {k}={v}' for k, v in cell.setting)}"
        if name not in lengths and (steps := run_length(spec, cell, tables)) is not None:
            lengths[name] = steps
    short = {name: steps for name, steps in lengths.items() if 0 < steps < spec.eval_freq}
    if not short:
        return None
    runs = f"of {spec.n_timesteps} env steps" if spec.n_timesteps > 0 else shown(short)
    return (
        f"Note: runs {runs} are shorter than --eval-freq {spec.eval_freq}, so train.py evaluates none of them: "
        f"each cell's final model is evaluated at its end instead ({spec.eval_episodes} episodes), and the "
        "report shows those final returns"
    )


def shown(lengths: dict[str, int], most: int = 3) -> str:
    names = [f"{name} ({steps} env steps)" for name, steps in lengths.items()]
    return "; ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def run_length(spec: SweepSpec, cell: Cell, tables: dict[str, dict[str, Any] | None]) -> int | None:
    """The env steps of `cell`'s runs, None where only its own process can tell (its error is its own)."""
    if spec.n_timesteps > 0:
        return spec.n_timesteps
    try:
        value = parse_key_values(list(cell.params(spec)), "-params").get("n_timesteps")
        if value is None:
            conf = spec.conf_file or str(hyperparams.default_file(cell.algo))
            if conf not in tables:
                yaml_file = Path(conf).suffix in (".yml", ".yaml")
                tables[conf] = hyperparams.read_file(conf) if yaml_file else None
            table = tables[conf]
            if table is None:
                return None
            value = hyperparams.select_entry(table, cell.env, conf, verbose=0).get("n_timesteps")
    except (ConfigError, LiteralError):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value and abs(value) < 1e18:
        return int(value)
    return None
