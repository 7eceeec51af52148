"""rlbench logs SB3's key for every quantity SB3 logs (issue 35 item 4): the keys of a real SBX run's
progress.csv (tests/data/sbx_progress, README there) are columns of rlbench's progress.csv for the same
algorithm, and each that SBX gave a value has one in rlbench's rows too."""

import csv
from pathlib import Path

import pytest

from rlbench.cli.train import main
from rlbench.store.metric_names import RENAMED_METRICS
from tests.run_files import SBX_PROGRESS

# Keys SB3 logs only under conditions the fixture runs do not meet, and rlbench cannot have: SB3 logs them when
# the env's info holds `is_success`, which rlbench does not read. None may appear in the fixtures' headers.
# (train/std, gSDE's, is logged with use_sde: tests/unit/test_gsde.py.)
NOT_LOGGED = {
    "rollout/success_rate": "rlbench reads no is_success from the env's info",
    "eval/success_rate": "rlbench reads no is_success from the env's info",
}
TINY = ["learning_starts:100", "batch_size:8", "buffer_size:1000", "policy_kwargs:dict(net_arch=[8])"]


def read_progress(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open() as stream:
        reader = csv.DictReader(stream)
        return list(reader.fieldnames or []), list(reader)


def tiny_run(tmp_path: Path, algo: str) -> tuple[list[str], list[dict[str, str]]]:
    """progress.csv of 600 env steps of Pendulum (3 episodes), a row per episode, an evaluation every 200."""
    argv = ["--algo", algo, "--env", "Pendulum-v1", "-n", "600", "--eval-freq", "200", "--eval-episodes", "1"]
    assert main([*argv, "--log-interval", "1", "--verbose", "0", "-f", str(tmp_path), "-params", *TINY]) == 0
    return read_progress(tmp_path / algo / "Pendulum-v1_1" / "progress.csv")


@pytest.mark.parametrize(
    "algo", ["sac", pytest.param("tqc", marks=pytest.mark.slow), pytest.param("crossq", marks=pytest.mark.slow)]
)
def test_every_key_of_an_sbx_run_is_logged_by_rlbench_for_the_same_algorithm(tmp_path, algo):
    sbx_header, sbx_rows = read_progress(SBX_PROGRESS / f"{algo}.csv")
    assert not set(NOT_LOGGED) & set(sbx_header)
    header, rows = tiny_run(tmp_path, algo)

    assert sorted(set(sbx_header) - set(header)) == []
    assert not set(RENAMED_METRICS) & set(header)  # one name per quantity: SB3's
    sbx_valued = {key for row in sbx_rows for key, value in row.items() if value}
    assert sbx_valued == set(sbx_header)  # the fixture's rows hold a rollout, a training and an evaluation
    assert sorted(key for key in sbx_valued if not any(row[key] for row in rows)) == []
    if algo == "sac":
        check_time_keys(rows)


def check_time_keys(rows: list[dict[str, str]]) -> None:
    """time/total_timesteps is the env steps of the row, time/episodes the episodes ended, time/time_elapsed whole
    seconds since training began, time/fps env steps per second over that time; train/n_updates the gradient
    steps so far; an evaluation row holds its env step too."""
    rollouts = [row for row in rows if row["rollout/ep_rew_mean"]]
    # written as SB3 writes them: integers, "1" and not "1.0"
    assert [(row["time/total_timesteps"], row["time/episodes"]) for row in rollouts] == [
        ("200", "1"),
        ("400", "2"),
        ("600", "3"),
    ]
    for row in rollouts:
        elapsed, fps = float(row["time/time_elapsed"]), float(row["time/fps"])
        assert elapsed == int(elapsed) >= 0 and fps > 0
        assert (fps + 1) * (elapsed + 1) >= int(row["time/total_timesteps"])  # both are rounded down
    assert rollouts[-1]["train/n_updates"] == "500"  # one per env step after learning_starts 100, an int as SB3's
    evaluations = [int(row["time/total_timesteps"]) for row in rows if row["eval/mean_reward"]]
    assert evaluations == [200, 400, 600]
