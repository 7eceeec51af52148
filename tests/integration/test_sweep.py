"""Sweeps on real Ray (issue 17): a local instance started by the sweep itself, and a two-node cluster
started with `ray start`, each in its own temp folder, stopped by PID afterwards."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlbench.cli import train as train_cli
from rlbench.errors import ConfigError
from rlbench.sweep import command as sweep
from tests.conftest import REPO_ROOT
from tests.integration.test_tracking import isolated_env
from tests.ray_cluster import Cluster, kill_all, processes_under, ray_env, short_temp_dir, wait_until
from tests.run_files import wandb_run

TINY = ["-params", "learning_starts:100", "buffer_size:2000", "policy_kwargs:dict(net_arch=[16])"]
EVAL = ["--eval-freq", "200", "--eval-episodes", "2"]


@pytest.fixture
def local_ray(monkeypatch):
    """RAY_TMPDIR for a sweep's private Ray instance, and afterwards anything of it still alive killed."""
    folder = short_temp_dir()
    for key, value in ray_env(folder).items():
        monkeypatch.setenv(key, value)
    yield folder
    kill_all(processes_under(str(folder)))


def manifest(log: Path, name: str) -> dict:
    return json.loads((log / "sweeps" / name / "manifest.json").read_text())


def files_of(run_dir: Path) -> set[str]:
    return {path.relative_to(run_dir).as_posix() for path in run_dir.rglob("*") if path.is_file()}


def test_a_local_sweep_leaves_train_py_run_folders_a_manifest_and_a_report_and_a_rerun_does_nothing(
    tmp_path, ray_session, capsys
):
    log = tmp_path / "logs"
    argv = ["--algos", "sac", "crossq", "--envs", "Pendulum-v1", "--seeds", "3", "-n", "400", *EVAL, *TINY]
    argv += ["-f", str(log), "--seeds-per-process", "3"]
    assert sweep.main(argv) == 0
    out = capsys.readouterr().out
    assert "Packing: CPU cluster" in out and "3 seeds per process" in out and "(flags override the default)" in out

    record = manifest(log, "sac-crossq_Pendulum-v1")
    cells = record["cells"]
    assert sorted(cells) == sorted(f"{algo}/Pendulum-v1/-/{seed}" for algo in ("sac", "crossq") for seed in (1, 2, 3))
    for key, cell in cells.items():
        assert cell["state"] == "done" and cell["attempts"] == 1 and cell["error"] is None, (key, cell)
        assert cell["node"] and cell["wall_time_s"] > 0
        assert (log / "sweeps/sac-crossq_Pendulum-v1" / cell["log"]).is_file()
    assert sorted(p.relative_to(log).as_posix() for p in log.glob("*/Pendulum-v1_*")) == sorted(
        cell["run_dir"] for cell in cells.values()
    )
    assert not (log / "sweeps/sac-crossq_Pendulum-v1/staging").exists()
    report = (log / "sweeps/sac-crossq_Pendulum-v1/report.md").read_text()
    assert "| Pendulum-v1 | sac | 3 | 400 |" in report and "| Pendulum-v1 | crossq | 3 | 400 |" in report
    assert (log / "sweeps/sac-crossq_Pendulum-v1/report_Pendulum-v1.png").stat().st_size > 0

    # Each cell is what its command.txt (train.py) writes: the same files, config and args. The command trains
    # that seed alone (issue 32 item 14), as a single run: equivalent to its seed of the vmapped group.
    seed_2 = log / cells["sac/Pendulum-v1/-/2"]["run_dir"]
    command = shlex.split((seed_2 / "Pendulum-v1/command.txt").read_text())
    assert command[:2] == ["python", "train.py"] and command[-4:] == ["--seed", "2", "--n-seeds", "1"]
    by_hand = tmp_path / "by_hand"
    train_argv = command[2:]
    train_argv[train_argv.index("-f") + 1] = str(by_hand)
    assert train_cli.main(train_argv) == 0
    twin = by_hand / "sac/Pendulum-v1_1"
    assert files_of(twin) == files_of(seed_2)
    for name in ("config.yml", "args.yml"):
        ours, theirs = (yaml.safe_load((run / "Pendulum-v1" / name).read_text()) for run in (seed_2, twin))
        if name == "args.yml":
            assert ours["log_folder"] != theirs["log_folder"] and ours["group"] and "group" not in theirs
            assert (ours["n_seeds"], theirs["n_seeds"]) == (3, 1)
            for key in ("log_folder", "group", "n_seeds"):
                ours.pop(key), theirs.pop(key, None)
            assert ours["seed"] == 2 and ours["save_replay_buffer"] is True and ours["num_threads"] == -1
        assert ours == theirs, name
    ours, theirs = (np.load(run / "evaluations.npz") for run in (seed_2, twin))
    np.testing.assert_array_equal(ours["timesteps"], theirs["timesteps"])
    np.testing.assert_allclose(ours["results"], theirs["results"], rtol=1e-3)  # about 1e-6 apart here

    before = sorted(log.rglob("*"))
    assert sweep.main(argv) == 0
    assert "nothing to do, all 6 cells ran earlier (6 done, 0 failed)" in capsys.readouterr().out
    assert sorted(log.rglob("*")) == before


def test_a_bad_value_fails_its_cell_alone_and_runs_come_back_through_ray_without_shared_storage(
    tmp_path, ray_session, capsys
):
    log = tmp_path / "logs"
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "1", "-n", "300", *EVAL, *TINY]
    # n_envs is the run's key, checked by each cell (a learner key's bad value exits 2 before the sweep starts).
    argv += ["--grid", "n_envs:1,0", "-f", str(log), "--no-shared-fs", "--name", "bad", "--no-report"]
    assert sweep.main(argv) == 1
    captured = capsys.readouterr()
    cells = manifest(log, "bad")["cells"]
    good, bad = cells["sac/Pendulum-v1/n_envs=1/1"], cells["sac/Pendulum-v1/n_envs=0/1"]
    assert good["state"] == "done" and (log / good["run_dir"] / "evaluations.npz").is_file()
    assert yaml.safe_load((log / good["run_dir"] / "Pendulum-v1/config.yml").read_text())["n_envs"] == 1
    assert bad["state"] == "failed" and bad["attempts"] == 1 and "n_envs" in bad["error"], bad
    assert bad["run_dir"] is None and "failed sac/Pendulum-v1/n_envs=0/1: " in captured.err
    assert [p.name for p in (log / "sac").iterdir()] == ["Pendulum-v1_1"]  # nothing of the failed cell
    assert not (log / "sweeps/bad/staging").exists() and not (log / "sweeps/bad/logs").exists()
    assert not list(Path(tempfile.gettempdir()).glob("rlbench-sweep-sac_Pendulum-v1_*"))  # workers cleaned up

    # Failed cells are not retried by a rerun, unless asked to.
    assert sweep.main(argv) == 1
    assert "nothing to do, all 2 cells ran earlier (1 done, 1 failed; --retry-failed" in capsys.readouterr().out


def test_bad_input_exits_2_before_anything_is_written(tmp_path, capsys):
    log = tmp_path / "logs"
    for argv, message in (
        (["--algos", "trpo"], "trpo"),
        (["--envs", "Pendulum-v9"], "Pendulum-v9"),
        (["--grid", "policy_delay"], "--grid 'policy_delay': expected KEY:VALUE1,VALUE2"),
        (["--grid", "policy_delay:1,1"], "listed twice"),
        (["--grid", "temperature_loss:log_alpha,1"], "temperature_loss: expected log_alpha (SB3's, and SBX's since"),
        (["--grid", "batch_size:8,abc"], "batch_size: expected a number, got 'abc' (from --grid batch_size:abc"),
        (["--name", "../x"], "--name '../x'"),
        (["--params-for", "crossq", "gamma:0.9"], "--params-for crossq: not one of --algos"),
        (["-params", "gamma:dict("], "-params"),
        (["--seed-list", "1", "3", "3"], "--seed-list: seed 3 given more than once; give each seed once"),
    ):
        assert sweep.main([*argv, "-f", str(log)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
    assert not log.exists()


def test_without_ray_the_sweep_exits_2_with_the_install_command_before_anything_is_written(tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "ray.py").write_text("raise ImportError(\"No module named 'ray'\", name='ray')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stubs), REPO_ROOT])}
    done = subprocess.run(
        [sys.executable, "-m", "rlbench.sweep", "-n", "300", "-f", str(tmp_path / "logs")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == 'error: sweeps run on Ray, which is not installed: pip install -e ".[sweep]"'
    assert not (tmp_path / "logs").exists()


def test_a_changed_grid_under_the_same_name_is_refused_with_the_difference(tmp_path, capsys):
    log = tmp_path / "logs"
    folder = log / "sweeps" / "s"
    folder.mkdir(parents=True)
    spec = sweep.spec_from_args(sweep.build_parser().parse_args(["--name", "s", "--seeds", "2", "-n", "300"]))
    from rlbench.sweep.manifest import new_manifest

    new_manifest(spec, "python -m rlbench.sweep ...").save(folder)
    before = (folder / "manifest.json").read_text()
    assert sweep.main(["--name", "s", "--seeds", "3", "-n", "300", "-f", str(log)]) == 2
    err = capsys.readouterr().err
    assert "seeds: [1, 2] there, [1, 2, 3] now" in err and "use another --name" in err
    (folder / "manifest.json").write_text(before.replace('"state": "pending"', '"state": "exploded"', 1))
    assert sweep.main(["--name", "s", "--seeds", "2", "-n", "300", "-f", str(log)]) == 2
    assert "state 'exploded' is not one of" in capsys.readouterr().err
    (folder / "manifest.json").write_text(before.replace('"run_dir": null', '"run_dir": "../../etc"', 1))
    assert sweep.main(["--name", "s", "--seeds", "2", "-n", "300", "-f", str(log)]) == 2
    assert "is not <algo>/<folder> under the log root" in capsys.readouterr().err


def sweep_process(log: Path, env: dict, *argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rlbench.sweep", *argv, "-f", str(log)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def checkpoints_in_staging(log: Path, name: str) -> list[Path]:
    return list((log / "sweeps" / name / "staging").glob("*/*/*/rl_model_*_steps.zip"))


@pytest.mark.slow  # 30-90 s: two train runs to their checkpoints, stopped, then continued, with W&B files
def test_ctrl_c_stops_the_sweep_with_exit_75_and_the_same_command_finishes_it(tmp_path, local_ray):
    """Also --track: every cell's W&B run is in the sweep's group, and a continued cell continues its run."""
    log = tmp_path / "logs"
    ray_settings = {key: value for key, value in ray_env(local_ray).items() if key.startswith("RAY")}
    env = isolated_env(tmp_path, WANDB_MODE="offline", **ray_settings)
    # Long enough that no cell ends in the second or two a stop takes to reach it, however busy the machine;
    # half a CPU each, so that both cells run at once even where Ray counts one CPU (a cell that ends before
    # the other's first checkpoint leaves staging, and the wait below would never see two).
    # 20k steps: an idle 2-core VM runs a cell of 6k in about 5 s, which a stop sent after both cells' first
    # checkpoints could miss (seen: both cells done before the stop reached them).
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "2", "-n", "20000", "--save-freq", "1000"]
    argv += ["--eval-freq", "5000", "--eval-episodes", "2", *TINY, "--name", "c", "--no-report", "--track"]
    argv += ["--cpus-per-run", "0.5"]
    driver = sweep_process(log, env, *argv)
    try:
        # A checkpoint of each cell, counted by run folder: a cell that finished has left staging with its own, and
        # two checkpoints of the other alone would send the stop too late for the finished one (seen on a busy CI).
        wait_until(
            lambda: len({path.parent for path in checkpoints_in_staging(log, "c")}) >= 2,
            180,
            what="a checkpoint of each cell",
            process=driver,
        )
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=180)
    finally:
        driver.kill()
    assert driver.returncode == 75, out
    assert "every run writes its checkpoint and stops" in out and "Continue with the same command:" in out
    cells = manifest(log, "c")["cells"]
    assert {cell["state"] for cell in cells.values()} == {"interrupted"}, cells
    assert not list(log.glob("sac/*"))  # nothing unfinished in the log root
    wait_until(lambda: not processes_under(str(local_ray)), 60, what="the driver's Ray instance to stop")

    again = sweep_process(log, env, *argv)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    cells = manifest(log, "c")["cells"]
    assert {cell["state"] for cell in cells.values()} == {"done"} and all(c["attempts"] == 2 for c in cells.values())
    assert out.count("continued from") == 2, out
    for cell in cells.values():
        text = (log / "sweeps/c" / cell["log"]).read_text()
        assert "=== continuing from checkpoint" in text and "Resuming from" in text
        steps = np.load(log / cell["run_dir"] / "evaluations.npz")["timesteps"]
        np.testing.assert_array_equal(steps, np.arange(5000, 20001, 5000))  # one history across the stop
        assert_whole_history(log / cell["run_dir"], 20000, 5000)  # progress.csv and Monitor file too (issue 32)
    assert sorted(p.name for p in (log / "sac").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]
    runs = [wandb_run(path) for path in (tmp_path / "wandb").glob("offline-run-*")]
    assert len(runs) == 4 and {run["group"] for run in runs} == {"c"}  # two attempts of two cells
    ids = {seed: {run["id"] for run in runs if run["config"]["seed"] == seed} for seed in (1, 2)}
    assert all(len(found) == 1 for found in ids.values()) and ids[1] != ids[2], ids  # continued, not new


@pytest.mark.slow
def test_two_node_cluster_cells_land_on_both_nodes_and_a_killed_node_s_cells_resume_on_the_head(tmp_path):
    """RELIABILITY's lost-worker case on a real two-node cluster: the worker node's processes are killed by
    PID mid-run; its cells are retried on the head and continue from their checkpoints (shared storage)."""
    cluster = Cluster()
    try:
        address = cluster.start_head(num_cpus=1)
        cluster.add_worker("worker", num_cpus=1)
        log = tmp_path / "logs"
        argv = ["--address", address, "--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "3", "-n", "8000"]
        argv += ["--save-freq", "1000", "--eval-freq", "2000", "--eval-episodes", "2", *TINY, "--name", "two"]
        argv += ["--no-report"]
        driver = sweep_process(log, cluster.env, *argv)

        def worker_cell_checkpointed():
            """A cell whose process runs on the worker node (its log names the pid) and has a checkpoint."""
            on_worker = {p.pid for p in cluster.node_processes("worker")}
            for log_file in (log / "sweeps/two/logs").glob("*.log"):
                pids = re.findall(r"^=== .*, pid (\d+), ", log_file.read_text(), re.MULTILINE)
                staging = log / "sweeps/two/staging" / log_file.stem
                if pids and int(pids[-1]) in on_worker and list(staging.glob("*/*/rl_model_*_steps.zip")):
                    return True
            return False

        wait_until(worker_cell_checkpointed, 120, what="a cell on the worker node with a checkpoint", process=driver)
        killed = cluster.kill_node("worker")
        assert killed
        out, _ = driver.communicate(timeout=300)
        assert driver.returncode == 0, out
    finally:
        cluster.stop()
    cells = manifest(log, "two")["cells"]
    assert {cell["state"] for cell in cells.values()} == {"done"}, cells
    retried = [cell for cell in cells.values() if cell["attempts"] == 2]
    assert retried and "process lost (NodeDiedError" in out, out
    nodes_seen = set()
    for line in out.splitlines():
        if " started on " in line:
            nodes_seen.add(line.split(" started on ")[1].split()[0])
    assert len(nodes_seen) == 2, out  # cells landed on both nodes
    for cell in retried:
        text = (log / "sweeps/two" / cell["log"]).read_text()
        assert text.count("=== sac Pendulum-v1") == 2 and "=== continuing from checkpoint" in text
        assert cell["node"] in nodes_seen
    runs = sorted(p.name for p in (log / "sac").iterdir())
    assert runs == ["Pendulum-v1_1", "Pendulum-v1_2", "Pendulum-v1_3"]  # none duplicated, none lost
    for cell in cells.values():
        steps = np.load(log / cell["run_dir"] / "evaluations.npz")["timesteps"]
        np.testing.assert_array_equal(steps, np.arange(2000, 8001, 2000))
        assert_whole_history(log / cell["run_dir"], 8000, 2000)  # a killed node's rows once each (issue 32)
    assert not (log / "sweeps/two/staging").exists()


def test_a_move_the_driver_was_killed_in_is_finished_by_the_next_run_and_a_forged_one_refused(tmp_path):
    """The driver records a finished run's move in moved.json before renaming; if it dies between the two,
    the next invocation completes the move (no run lost or trained twice). moved.json is untrusted."""
    from rlbench.sweep.manifest import RUNNING, new_manifest
    from rlbench.sweep.moves import finish_moves

    log = tmp_path / "logs"
    spec = sweep.spec_from_args(sweep.build_parser().parse_args(["--name", "m", "--seeds", "2", "-n", "300"]))
    folder = log / "sweeps" / "m"
    manifest_ = new_manifest(spec, "python -m rlbench.sweep ...")
    manifest_.cells["sac/Pendulum-v1/-/1"].state = RUNNING
    staging = folder / "staging" / "sac_Pendulum-v1_x_s1"
    staged = staging / "sac" / "Pendulum-v1_1"
    (staged / "Pendulum-v1").mkdir(parents=True)
    (staged / "evaluations.npz").write_bytes(b"run")
    (log / "sac" / "Pendulum-v1_1").mkdir(parents=True)  # claimed by the dead driver, still empty
    move = {"staged": str(staged), "final": "sac/Pendulum-v1_1", "state": "done", "error": None}
    moves = {"sac/Pendulum-v1/-/1": move}
    (staging / "moved.json").write_text(json.dumps(moves))
    cells = {cell.key: cell for cell in spec.cells()}
    finish_moves(folder, manifest_, log, cells)
    assert (log / "sac/Pendulum-v1_1/evaluations.npz").read_bytes() == b"run" and not staging.exists()
    record = manifest(log, "m")["cells"]["sac/Pendulum-v1/-/1"]
    assert (record["state"], record["run_dir"]) == ("done", "sac/Pendulum-v1_1")

    from rlbench.errors import ConfigError

    for forged in (
        {"staged": "/etc", "final": "sac/Pendulum-v1_2", "state": "done", "error": None},
        {"staged": None, "final": "../../outside", "state": "done", "error": None},
        {"staged": None, "final": "sac/Pendulum-v1_2", "state": "rm -rf", "error": None},
    ):
        staging.mkdir(parents=True, exist_ok=True)
        (staging / "moved.json").write_text(json.dumps({"sac/Pendulum-v1/-/2": forged}))
        with pytest.raises(ConfigError, match=r"moved\.json: unreadable"):
            finish_moves(folder, manifest_, log, cells)
    assert sorted(p.name for p in (log / "sac").iterdir()) == ["Pendulum-v1_1"]


def test_the_moves_a_driver_records_are_those_the_next_driver_finishes(tmp_path):
    """moves.py's writer and reader agree: a driver killed after its renames but before it saved the
    manifest leaves moved.json as claim_run_folders made it, and the next driver records each finished
    seed's run folder and final evaluation from it; the failed seed is left as it was, to run again."""
    from rlbench.sweep.cell import TaskOutcome
    from rlbench.sweep.grid import Task
    from rlbench.sweep.manifest import RUNNING, new_manifest
    from rlbench.sweep.moves import claim_run_folders, finish_moves, record_and_apply_moves

    log = tmp_path / "logs"
    spec = sweep.spec_from_args(sweep.build_parser().parse_args(["--name", "w", "--seeds", "2", "-n", "300"]))
    folder = log / "sweeps" / "w"
    record = new_manifest(spec, "python -m rlbench.sweep ...")
    task = Task(tuple(spec.cells()))
    staging = folder / "staging" / task.id
    staged = [staging / "sac" / f"Pendulum-v1_{seed}" for seed in (1, 2)]
    for run in staged:
        run.mkdir(parents=True)
        (run / "evaluations.npz").write_bytes(run.name.encode())
    final_eval = {"env_steps": 300, "mean_return": -1234.5, "episodes": 2}
    outcome = TaskOutcome(
        codes=[0, 1],
        errors=[None, "diverged"],
        staged=[str(run) for run in staged],
        archives=[None, None],
        node="n",
        wall_time_s=1.0,
        final_evals=[final_eval, None],
    )
    moves = claim_run_folders(task, outcome, log)
    assert list(moves) == ["sac/Pendulum-v1/-/1"] and moves["sac/Pendulum-v1/-/1"]["final"] == "sac/Pendulum-v1_1"
    record_and_apply_moves(moves, staging, log)
    for cell in spec.cells():
        record.cells[cell.key].state = RUNNING  # the manifest as the killed driver last saved it
    finish_moves(folder, record, log, {cell.key: cell for cell in spec.cells()})
    cells = manifest(log, "w")["cells"]
    assert cells["sac/Pendulum-v1/-/1"]["run_dir"] == "sac/Pendulum-v1_1"
    assert cells["sac/Pendulum-v1/-/1"]["final_eval"] == final_eval and cells["sac/Pendulum-v1/-/1"]["state"] == "done"
    assert cells["sac/Pendulum-v1/-/2"]["state"] == RUNNING and cells["sac/Pendulum-v1/-/2"]["run_dir"] is None
    assert (log / "sac/Pendulum-v1_1/evaluations.npz").read_bytes() == b"Pendulum-v1_1"
    assert sorted(path.name for path in (log / "sac").iterdir()) == ["Pendulum-v1_1"]


def forged_sweep(log: Path, name: str) -> tuple[Path, str]:
    """A sweep folder of two cells as a driver leaves it: the manifest, seed 1 done in its run folder."""
    from rlbench.sweep.manifest import DONE, new_manifest

    argv = ["--name", name, "--seeds", "2", "-n", "300", "-f", str(log)]
    spec = sweep.spec_from_args(sweep.build_parser().parse_args(argv))
    record = new_manifest(spec, "python -m rlbench.sweep ...")
    record.cells["sac/Pendulum-v1/-/1"].state = DONE
    record.cells["sac/Pendulum-v1/-/1"].run_dir = "sac/Pendulum-v1_1"
    (log / "sac/Pendulum-v1_1").mkdir(parents=True)
    (log / "sac/Pendulum-v1_1/evaluations.npz").write_bytes(b"seed 1")
    record.save(log / "sweeps" / name)
    return log / "sweeps" / name, shlex.join(argv)


def test_a_deeply_nested_manifest_or_moved_json_is_refused_as_unreadable_in_one_line(tmp_path, capsys):
    """Issue 32, item 1: 5,000 nested arrays (10 KB) were a RecursionError traceback; the manifest's size
    bound grows with the grid, so an honest large sweep is never refused."""
    log = tmp_path / "logs"
    folder, argv = forged_sweep(log, "deep")
    honest = (folder / "manifest.json").read_text()
    nested = "[" * 5000 + "]" * 5000
    for path, text in ((folder / "manifest.json", nested), (folder / "staging/sac_x_s2/moved.json", nested)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        assert sweep.main(shlex.split(argv)) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: unreadable (nested too deeply to parse); move the sweep folder away")
        assert len(err.strip().splitlines()) == 1, err
        assert path.read_text() == text  # nothing rewritten
        (folder / "manifest.json").write_text(honest)
    (folder / "manifest.json").write_text(honest + " " * (1 << 20))  # past 1 MiB, inside this grid's bound
    from rlbench.sweep.manifest import load_manifest

    spec = sweep.spec_from_args(sweep.build_parser().parse_args(shlex.split(argv)))
    assert load_manifest(folder / "manifest.json", spec).cells["sac/Pendulum-v1/-/1"].run_dir == "sac/Pendulum-v1_1"
    (folder / "manifest.json").write_text(honest + " " * (2 << 20))
    with pytest.raises(ConfigError, match=r"unreadable \(larger than \d+ bytes"):
        load_manifest(folder / "manifest.json", spec)


def test_a_forged_moved_json_never_moves_a_run_onto_another_folder(tmp_path, capsys):
    """Issue 32, item 5: a `final` naming another cell's finished folder was an OSError traceback."""
    log = tmp_path / "logs"
    folder, argv = forged_sweep(log, "onto")
    staging = folder / "staging" / "sac_Pendulum-v1_x_s2"
    staged = staging / "sac" / "Pendulum-v1_1"
    (staged / "Pendulum-v1").mkdir(parents=True)
    (staged / "evaluations.npz").write_bytes(b"seed 2")
    (log / "sac/Pendulum-v1_3").mkdir()  # a train.py run of the user's, not a cell's
    (log / "sac/Pendulum-v1_3/progress.csv").write_text("theirs")
    (log / "crossq/Pendulum-v1_1").mkdir(parents=True)  # empty, but another algorithm's
    for final, message in (
        ("sac/Pendulum-v1_1", "sac/Pendulum-v1_1 is another cell's run folder"),
        ("sac/Pendulum-v1_3", "sac/Pendulum-v1_3 exists already"),
        ("crossq/Pendulum-v1_1", "'crossq/Pendulum-v1_1' is not a run folder of sac on Pendulum-v1"),
        ("sac/Pendulum-v1_8", "final_eval must hold env_steps, mean_return (finite) and episodes"),
        ("sac/Pendulum-v1_9", None),  # the staged folder is there: no error for it...
    ):
        move = {"staged": str(staged), "final": final, "state": "done", "error": None}
        move["final_eval"] = {
            "env_steps": 300,
            "mean_return": float("nan") if final.endswith("8") else -1.5,
            "episodes": 2,
        }
        (staging / "moved.json").write_text(json.dumps({"sac/Pendulum-v1/-/2": move}))
        if message is None:
            break
        assert sweep.main(shlex.split(argv)) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {staging / 'moved.json'}: unreadable (sac/Pendulum-v1/-/2: {message}")
        assert len(err.strip().splitlines()) == 1, err
    shutil.rmtree(staged)  # ...but with it gone and no final folder, the move names nothing that exists
    assert sweep.main(shlex.split(argv)) == 2
    assert "neither its staged folder nor sac/Pendulum-v1_9 exists" in capsys.readouterr().err
    assert (log / "sac/Pendulum-v1_1/evaluations.npz").read_bytes() == b"seed 1"
    assert (log / "sac/Pendulum-v1_3/progress.csv").read_text() == "theirs"
    assert sorted(p.name for p in (log / "sac").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_3"]
    assert manifest(log, "onto")["cells"]["sac/Pendulum-v1/-/2"]["state"] == "pending"


def test_a_second_driver_of_the_same_sweep_exits_2_and_a_wrong_address_leaves_nothing(tmp_path, capsys, monkeypatch):
    import fcntl

    log = tmp_path / "logs"
    folder = log / "sweeps" / "l"
    folder.mkdir(parents=True)
    with open(folder / "driver.lock", "a+") as held:  # the first driver, alive
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("driver pid 4242 on elsewhere\n")
        held.flush()
        assert sweep.main(["--name", "l", "-n", "300", "-f", str(log)]) == 2
    err = capsys.readouterr().err
    assert "sweep l is running already (driver pid 4242 on elsewhere)" in err
    assert sorted(p.name for p in folder.iterdir()) == ["driver.lock"]

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert sweep.main(["--name", "w", "-n", "300", "-f", str(log), "--address", "127.0.0.1:9"]) == 2
    assert "--address 127.0.0.1:9" in capsys.readouterr().err
    assert not (log / "sweeps" / "w").exists()


@pytest.mark.slow  # 20-40 s: a cell stopped after its first checkpoint, then continued to its end
def test_a_stopped_and_continued_cell_keeps_every_log_row_and_the_hint_is_the_command_run(
    tmp_path, ray_session, capsys
):
    """Issue 32, items 4 and 6: SIGTERM, then the same command. The continued cell's progress.csv and
    Monitor file hold every attempt's rows (they held only the last attempt's), and the resume hint is the
    command actually run, not the manifest's (here forged with an escape sequence)."""
    import threading

    from rlbench.sweep.manifest import new_manifest

    log = tmp_path / "logs"
    # Long enough that the cell cannot end in the second or two a stop takes to reach it: an idle 2-core VM
    # ran an 8k-step cell to its end after two progress.csv rows and before the stop (seen in CI).
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "1", "-n", "20000", "--save-freq", "1000"]
    argv += ["--eval-freq", "5000", "--eval-episodes", "2", *TINY, "--name", "h", "--no-report", "-f", str(log)]
    spec = sweep.spec_from_args(sweep.build_parser().parse_args(argv))
    new_manifest(spec, "python -m rlbench.sweep \x1b]0;owned\x07 --evil").save(log / "sweeps" / "h")

    def stop_after_a_checkpoint():
        wait_until(lambda: checkpoints_in_staging(log, "h"), 120, what="a checkpoint of the cell")
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # a late signal must not end pytest
    try:
        threading.Thread(target=stop_after_a_checkpoint, daemon=True).start()
        assert sweep.main(argv) == 75
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert f"Continue with the same command:\n  {shlex.join(['python', '-m', 'rlbench.sweep', *argv])}\n" in err
    assert "\x1b" not in err and "--evil" not in err
    first = {path.name for path in (log / "sweeps/h/staging").glob("*/sac/*")}
    assert len(first) == 1 and (log / "sweeps/h/staging").is_dir()

    assert sweep.main(argv) == 0
    assert_whole_history(log / manifest(log, "h")["cells"]["sac/Pendulum-v1/-/1"]["run_dir"], 20000, 5000)


def test_a_forged_evaluations_npz_leaves_its_cell_out_of_the_sweep_report_with_a_warning(tmp_path, capsys):
    """Issue 32, item 12: one cell's forged evaluations.npz was a traceback that lost the whole report."""
    from rlbench.sweep.manifest import DONE, new_manifest
    from rlbench.sweep.report import write_sweep_report
    from tests.integration.test_scripts import forge_evaluations, write_evaluations

    log = tmp_path / "logs"
    spec = sweep.spec_from_args(sweep.build_parser().parse_args(["--name", "r", "--seeds", "2", "-n", "2000"]))
    record = new_manifest(spec, "python -m rlbench.sweep --name r")
    for seed in (1, 2):
        cell = record.cells[f"sac/Pendulum-v1/-/{seed}"]
        cell.state, cell.run_dir = DONE, f"sac/Pendulum-v1_{seed}"
    write_evaluations(log / "sac/Pendulum-v1_1", [1000, 2000], [1, 3])
    forged = forge_evaluations(log / "sac/Pendulum-v1_2", "3 GB header")
    report = write_sweep_report(spec, record, log / "sweeps/r", log, 100_000)
    assert report is not None and "| sac/Pendulum-v1_1 |" in report.read_text()
    assert "| sac/Pendulum-v1_2 |" not in report.read_text()
    assert f"warning: {forged}: unreadable (" in capsys.readouterr().err


def test_runs_shorter_than_eval_freq_are_said_at_the_start_and_reported_with_their_final_evaluations(
    tmp_path, ray_session, capsys
):
    """Issue 32, item 11: a README-style short sweep ended without a report and without a word."""
    log = tmp_path / "logs"
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "2", "-n", "300", "--eval-episodes", "2", *TINY]
    argv += ["-f", str(log), "--name", "short", "--seeds-per-process", "2"]  # one process: one compilation
    assert sweep.main(argv) == 0
    out = capsys.readouterr().out
    note = "Note: runs of 300 env steps are shorter than --eval-freq 10000, so train.py evaluates none of them"
    assert out.index(note) < out.index("Packing: ")  # at the start
    cells = manifest(log, "short")["cells"]
    for cell in cells.values():
        final = cell["final_eval"]
        assert final["env_steps"] == 300 and final["episodes"] == 2 and -2000 < final["mean_return"] < 0, final
        assert not (log / cell["run_dir"] / "evaluations.npz").exists()  # the run folder is train.py's
    report = (log / "sweeps/short/report.md").read_text()
    assert "| Pendulum-v1 | sac | 2 | 300 |" in report and "its final model evaluated by the sweep" in report
    for cell in cells.values():
        assert f"| {cell['run_dir']} |" in report and f"| {cell['final_eval']['mean_return']:.1f} |" in report
    assert f"Report: {log / 'sweeps/short/report.md'}" in out


def assert_whole_history(run_dir: Path, n_timesteps: int, eval_freq: int) -> None:
    """The run folder's progress.csv and Monitor file are one uninterrupted run's: a rollout row every 4
    episodes (200 steps each) and an evaluation row every `eval_freq` steps, each once, and every episode."""
    from rlbench.store.checkpoint import read_checkpoint

    with open(run_dir / "progress.csv") as file:
        rows = list(csv.DictReader(file))
    evaluations = [int(row["time/total_timesteps"]) for row in rows if row["eval/mean_reward"]]
    rollouts = [int(row["time/total_timesteps"]) for row in rows if row["rollout/ep_rew_mean"]]
    assert evaluations == list(range(eval_freq, n_timesteps + 1, eval_freq)), evaluations
    assert rollouts == list(range(800, n_timesteps + 1, 800)), rollouts
    monitor = (run_dir / "0.monitor.csv").read_text().splitlines()
    returns = [float(line.split(",")[0]) for line in monitor[2:]]
    final = read_checkpoint(run_dir / "Pendulum-v1.zip", load_replay_buffer=False)
    np.testing.assert_allclose(returns, final.arrays["host/finished_returns"], atol=1e-6)  # every episode, once
    assert len(returns) == n_timesteps // 200


@pytest.mark.slow  # 10-20 s: a cell killed after its first checkpoint, retried to its end
def test_a_killed_worker_s_cell_continues_and_its_folder_holds_each_log_row_once(tmp_path, ray_session, capsys):
    """Issue 32, item 4: the worker is SIGKILLed after logging past its checkpoint; the retry continues from
    the checkpoint, and the rows the first attempt logged after it are not kept twice."""
    import threading

    log = tmp_path / "logs"
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "1", "-n", "4000", "--save-freq", "1000"]
    argv += ["--eval-freq", "1000", "--eval-episodes", "2", *TINY, "--name", "k", "--no-report", "-f", str(log)]

    def worker_past_its_checkpoint():
        """The worker's pid once its run has a checkpoint at 1000 env steps and a progress.csv row at 1600."""
        for run in log.glob("sweeps/k/staging/*/sac/*"):
            rows = (run / "progress.csv").read_text() if (run / "progress.csv").is_file() else ""
            if (run / "rl_model_1000_steps.zip").is_file() and "\n1600," in rows:
                return int(re.findall(r", pid (\d+), ", next(log.glob("sweeps/k/logs/*.log")).read_text())[-1])
        return None

    killed = []
    thread = threading.Thread(
        target=lambda: killed.append(os.kill(wait_until(worker_past_its_checkpoint, 120, 0.05), signal.SIGKILL)),
        daemon=True,
    )
    thread.start()
    assert sweep.main(argv) == 0
    thread.join(5)
    assert killed, "the worker was not killed"
    out = capsys.readouterr().out
    assert "process lost (WorkerCrashedError" in out and "continued from" in out, out
    cell = manifest(log, "k")["cells"]["sac/Pendulum-v1/-/1"]
    assert cell["attempts"] == 2
    assert_whole_history(log / cell["run_dir"], 4000, 1000)
