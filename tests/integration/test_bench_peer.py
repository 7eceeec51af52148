"""`bench returns --peer PYTHON`: SBX trains the same grid through RL Zoo beside rlbench, with the same seeds,
env steps, evaluation schedule and (translated) hyperparameters, and the report shows both; a refused cell is
named; a --peer that is not a Python with sbx and rl_zoo3 exits 2 before anything is written.

The end-to-end test needs a peer venv (`RLBENCH_TEST_PEER=/path/to/python`); .ci/run builds one, so on CI
(CI=1) its absence fails the test instead of skipping it."""

import os
import stat
import sys

import numpy as np
import pytest
import yaml

from rlbench.bench.__main__ import main as bench_main

pytestmark = pytest.mark.filterwarnings("ignore:.*InvertedPendulum-v4 is out of date:DeprecationWarning")

# 100 gradient steps of a tiny SAC for both systems; TQC's cells are refused for the peer (a target update
# interval SBX does not have) and learn nothing here (learning_starts above -n).
TINY = [
    *("-n", "400", "--eval-freq", "200", "--eval-episodes", "1"),
    *("-params", "learning_starts:300", "policy_kwargs:dict(net_arch=[8])", "batch_size:16", "buffer_size:1000"),
    *("--params-for", "tqc", "target_update_interval:2", "learning_starts:1000"),
]


class ZooLoader(yaml.SafeLoader):
    """RL Zoo's args.yml and config.yml: an OrderedDict of (key, value) pairs, read as a dict."""


ZooLoader.add_constructor(
    "tag:yaml.org,2002:python/object/apply:collections.OrderedDict",
    lambda loader, node: dict(loader.construct_sequence(node.value[0], deep=True)),
)


def zoo_yaml(path):
    return yaml.load(path.read_text(), Loader=ZooLoader)  # a SafeLoader with one constructor more


def grid(log, output, peer, *extra):
    return [
        "returns",
        *("--algos", "sac", "tqc", "--envs", "Pendulum-v1", "--seeds", "2", "--seeds-per-run", "1"),
        *("-f", str(log), "--output", str(output), "--at-steps", "400", "--peer", peer, *extra, *TINY),
    ]


@pytest.mark.slow  # 48 s on 2 cores under a load of 7: 4 rlbench cells on Ray, then 2 SBX processes
def test_peer_trains_the_same_cells_beside_rlbench(peer_python, tmp_path, capsys, ray_session):
    peer = peer_python
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    assert bench_main(grid(log, output, peer)) == 0  # a refused cell is reported, not a failure
    out = capsys.readouterr().out
    report = output.read_text()
    refusal = "target_update_interval=2 (SBX updates the target critics at every gradient step)"
    for seed in (1, 2):
        assert f"sbx tqc Pendulum-v1 seed {seed}: refused: SBX cannot express {refusal}" in out
        assert f"sbx sac Pendulum-v1 seed {seed}: done in" in out
        assert f"tqc/Pendulum-v1 seed {seed} (refused: SBX cannot express {refusal})" in report
    assert "| Pendulum-v1 | sbx sac | 2 | 400 |" in report and "| Pendulum-v1 | rlbench sac | 2 | 400 |" in report
    # the two systems of one algo are the pair compared (tqc has no peer curve: nothing to compare it with)
    assert "rlbench sac vs sbx sac on Pendulum-v1 at 400: P(improvement) " in report
    assert "rlbench tqc vs" not in report
    assert "SBX through RL Zoo (sbx " in report and ", rl_zoo3 " in report

    cells = sorted((log / "sweeps" / "returns" / "sbx").iterdir())
    assert [cell.name.split("_")[-1] for cell in cells] == ["s1", "s2"]  # sac's two seeds; tqc's refused
    for seed, cell in zip((1, 2), cells, strict=True):
        run = cell / "sac" / "Pendulum-v1_1"
        with np.load(run / "evaluations.npz") as data:
            peer_steps, peer_returns = data["timesteps"], data["results"]
        for rlbench_run in (log / "sac").glob("Pendulum-v1_*"):
            with np.load(rlbench_run / "evaluations.npz") as data:
                assert list(data["timesteps"]) == list(peer_steps) == [200, 400]  # the same evaluation schedule
        assert peer_returns.shape == (2, 1)
        row = f"| sbx sac | Pendulum-v1 | {seed} | {run.relative_to(log)} | 400 | {peer_returns[-1, 0]:.1f} |"
        assert row in report
        # RL Zoo read the translated entry, with this cell's seed
        saved = zoo_yaml(run / "Pendulum-v1" / "args.yml")
        assert (saved["seed"], saved["n_timesteps"], saved["eval_freq"], saved["eval_episodes"]) == (seed, 400, 200, 1)
        config = zoo_yaml(run / "Pendulum-v1" / "config.yml")
        assert (config["batch_size"], config["learning_starts"], config["buffer_size"]) == (16, 300, 1000)
        assert config["policy_kwargs"]["net_arch"] == {"pi": [8], "qf": [8]}

    # The same command again: the peer's finished cells are not run again; --report-only reports them too.
    assert bench_main(grid(log, output, peer)) == 0
    assert "started" not in capsys.readouterr().out
    again = tmp_path / "again.md"
    assert bench_main([*grid(log, again, peer), "--report-only"]) == 0
    assert "| Pendulum-v1 | sbx sac | 2 | 400 |" in again.read_text()


def bad_peers(tmp_path):
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\necho hello\n")
    not_python.chmod(not_python.stat().st_mode | stat.S_IXUSR)
    return [
        (str(tmp_path / "missing" / "python"), "not an executable file"),
        (str(not_python), "not a Python that runs"),
        (sys.executable, "cannot import sbx, rl_zoo3"),  # rlbench's own Python: no SBX in it
    ]


def test_a_peer_that_is_not_a_python_with_sbx_exits_2_before_writing(tmp_path, capsys):
    folder = tmp_path / "work"
    folder.mkdir()
    for peer, why in bad_peers(tmp_path):
        args = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "-f", str(folder / "logs")]
        assert bench_main([*args, "--output", str(folder / "returns.md"), "--peer", peer]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --peer {peer}: {why}"), lines
        assert "pip install sbx-rl rl_zoo3" in lines[0]
        assert list(folder.iterdir()) == []


def test_plan_refuses_by_name_and_a_failing_peer_is_reported_per_cell(tmp_path):
    """Without SBX: the grid's cells planned (the refused ones named), then a peer whose process fails (a
    script standing in for its Python): each cell failed with the end of its log, none dropped."""
    from rlbench.bench import peer as sbx
    from rlbench.run.request import RunRequest
    from rlbench.sweep.grid import SweepSpec

    spec = SweepSpec(
        name="returns",
        algos=("sac", "tqc"),
        envs=("Pendulum-v1",),
        seeds=(1, 2),
        n_timesteps=400,
        params_for=(("tqc", ("precision:bfloat16",)),),
        eval_freq=200,
        eval_episodes=1,
    )
    cells = sbx.plan_cells(spec, RunRequest(n_timesteps=400), tmp_path / "sweep")
    assert [(c.cell.algo, c.cell.seed, c.zoo_algo) for c in cells] == [("sac", 1, "sac"), ("sac", 2, "sac"),
                                                                      ("tqc", 1, ""), ("tqc", 2, "")]  # fmt: skip
    assert cells[2].refusal == "SBX cannot express precision='bfloat16' (SBX trains in float32)"
    assert list(tmp_path.iterdir()) == []  # planning writes nothing

    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'Traceback (most recent call last):'\necho 'boom: no such algo' >&2\nexit 3\n")
    failing.chmod(failing.stat().st_mode | stat.S_IXUSR)
    events = []
    sbx.run_cells(cells, sbx.Peer(str(failing), "a stand-in"), spec, on_event=events.append)
    slots = len(os.sched_getaffinity(0))
    assert events.pop(0) == (
        f"SBX peer (a stand-in): 2 of 4 cells to run, up to {slots} processes at a time (one per core); 2 refused"
    )
    assert (
        sorted(e.split(": ", 1)[1] for e in events if "started" not in e)
        == ["failed: exit 3: Traceback (most recent call last): | boom: no such algo"] * 2
    )
    assert list(sbx.not_done(cells)) == [
        "sac/Pendulum-v1 seed 1 (failed: exit 3: Traceback (most recent call last): | boom: no such algo)",
        "sac/Pendulum-v1 seed 2 (failed: exit 3: Traceback (most recent call last): | boom: no such algo)",
        "tqc/Pendulum-v1 seed 1 (refused: SBX cannot express precision='bfloat16' (SBX trains in float32))",
        "tqc/Pendulum-v1 seed 2 (refused: SBX cannot express precision='bfloat16' (SBX trains in float32))",
    ]
    entry = yaml.safe_load((cells[0].folder / "sbx.yml").read_text())["Pendulum-v1"]
    assert (entry["n_timesteps"], entry["policy_kwargs"]["net_arch"]) == (400, {"pi": [256, 256], "qf": [256, 256]})
    report = "\n".join(sbx.report_lines(cells, None))
    assert "SBX cells without a finished run: sac/Pendulum-v1 seed 1 (failed: exit 3" in report

    # Run again (a failed cell is run afresh) with the peer's Python gone since the probe: failed, not raised.
    events.clear()
    sbx.run_cells(cells, sbx.Peer(str(tmp_path / "gone"), "a stand-in"), spec, on_event=events.append)
    assert [event.split(": ", 1)[1][:40] for event in events[1:]] == ["failed: cannot start: [Errno 2] No such "] * 2
    assert sbx.outcome(cells[0])["state"] == sbx.FAILED and not (cells[0].folder / "peer.log").read_text()
