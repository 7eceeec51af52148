"""The sweep's use of Ray (issue 32): packings no node can run, oversized grids, the private instance's
network, token and folder, its processes after the driver is killed, the board's events, and a retried
cell whose process was lost."""

from __future__ import annotations

import ipaddress
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

from rlbench.errors import ConfigError
from rlbench.sweep import command as sweep
from tests.integration.test_sweep import TINY, manifest
from tests.integration.test_tracking import isolated_env
from tests.ray_cluster import kill_all, processes_under, short_temp_dir, wait_until


def sweep_main(capsys, *argv: str) -> tuple[int, str]:
    code = sweep.main(list(argv))
    return code, capsys.readouterr().err


def test_a_packing_no_node_fits_and_oversized_grids_exit_2_before_anything_is_written(tmp_path, ray_session, capsys):
    log = tmp_path / "logs"
    base = ["--seeds", "1", "-n", "300", "-f", str(log), "--no-report"]
    for flags, message in (
        (["--cpus-per-run", "4"], "this machine: each process needs 4 CPU, and no node has that (nodes: 2 CPU no "),
        (["--gpus-per-run", "1"], "each process needs 1 CPU and 1 GPU, and no node has that"),
        (["--device", "gpu"], "--device gpu: this machine has no GPU that Ray can see; install rlbench[cuda]"),
        (["--device", "cuda:1", "--address", "auto"], "--device cuda:1: on a cluster Ray gives each process its"),
    ):
        code = sweep.main([*base, *flags])
        out, err = capsys.readouterr()
        assert code == 2 and err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err
        assert out == "" and not log.exists()  # the error line is the first line (issue 32, item 14)
    code, err = sweep_main(capsys, "--seeds", "6000", "--algos", "sac", "crossq", "-f", str(log))
    assert code == 2 and "the grid has 12000 runs (algos x envs x --grid settings x seeds), more than" in err, err
    (tmp_path / "file").write_text("")
    code, err = sweep_main(capsys, "-n", "300", "-f", str(tmp_path / "file"))
    assert code == 2 and err.strip().endswith(f"{tmp_path / 'file'} is a file, not a folder"), err
    assert not log.exists()


def test_on_a_cluster_a_packing_no_node_fits_is_refused_after_a_bounded_wait(tmp_path, ray_session, capsys):
    from rlbench.run.outputs import RunOutputs
    from rlbench.sweep.engine import run_sweep
    from rlbench.sweep.options import SweepOptions

    args = sweep.build_parser().parse_args(["--seeds", "1", "-n", "300", "--name", "c"])
    options = SweepOptions(log_root=tmp_path / "logs", address="auto", cpus_per_run=4, node_wait_s=1, report=False)
    start = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        spec = sweep.spec_from_args(args)
        run_sweep(spec, options, sweep.cell_template(args), RunOutputs(), sweep.record_args, "python -m ...")
    assert 1 <= time.monotonic() - start < 10
    assert str(raised.value).startswith("the cluster at --address auto after 1 s: each process needs 4 CPU, and no")
    assert "Waiting up to 1 s for a node that fits one process" in capsys.readouterr().out
    assert not (tmp_path / "logs").exists()


def test_a_huge_seed_count_is_refused_before_the_seeds_are_built(tmp_path):
    """Under a 3 GB address-space limit, as in the issue: building 5e9 seeds first was a MemoryError."""

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    done = subprocess.run(
        [sys.executable, "-m", "rlbench.sweep", "--seeds", "5000000000", "-f", str(tmp_path / "logs")],
        preexec_fn=limit_memory,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: --seeds: at most 10000 seeds (a sweep has at most 10000 runs), got 5000000000"
    assert not (tmp_path / "logs").exists()


WORKER_WARNS = """
import sys, ray
from rlbench.sweep.cluster import connect, disconnect
connect(ray, None)
ray.get(ray.remote(lambda: print("warning: something only Ray's worker saw", file=sys.stderr)).remote())
ray.get(ray.remote(lambda: None).remote())
import time; time.sleep(3)  # Ray forwards a worker's output to the driver asynchronously
disconnect(ray, None)
"""


def test_what_ray_s_workers_print_reaches_the_driver_s_console(tmp_path):
    """Issue 32 item 3: the private instance ran with log_to_driver=False, so Ray's own warnings (a task no
    node can run, a worker killed for memory) were swallowed. A real private instance, a real worker."""
    ray_tmp = short_temp_dir()
    try:
        env = isolated_env(tmp_path, RAY_TMPDIR=str(ray_tmp))
        done = subprocess.run(
            [sys.executable, "-c", WORKER_WARNS], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        kill_all(processes_under(str(ray_tmp)))
    assert done.returncode == 0, done.stderr
    assert "warning: something only Ray's worker saw" in done.stdout + done.stderr, done.stdout + done.stderr


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1, Ray's gRPC servers' dual-stack form
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


@pytest.mark.slow  # 15-30 s: a private Ray instance started by a sweep driver, then the driver killed
def test_the_private_instance_listens_on_loopback_keeps_its_token_and_folder_private_and_dies_with_its_driver(
    tmp_path,
):
    ray_tmp = short_temp_dir()
    env = isolated_env(tmp_path, RAY_TMPDIR=str(ray_tmp))
    env.pop("RAY_AUTH_MODE", None)  # Ray's default: token authentication for a local instance
    log = tmp_path / "logs"
    argv = ["--seeds", "1", "-n", "20000", "--eval-freq", "10000", *TINY, "-f", str(log), "--no-report"]
    driver = subprocess.Popen(
        [sys.executable, "-m", "rlbench.sweep", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        wait_until(
            lambda: list((log / "sweeps").glob("*/logs/*.log")), 120, what="a cell's process to start", process=driver
        )
        processes = processes_under(str(ray_tmp))
        names = {p.name() for p in processes}
        assert {"gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names, names
        listening = [
            (p.name(), c.laddr)
            for p in processes
            for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert len(listening) >= 4 and all(loopback(addr.ip) for _, addr in listening), listening

        (private,) = ray_tmp.iterdir()  # the instance's own folder: nothing of it beside
        assert private.name.startswith("rlbench-ray-") and private.stat().st_mode & 0o777 == 0o700
        assert (private / "auth_token").stat().st_mode & 0o777 == 0o600
        assert not (tmp_path / ".ray").exists()  # no persistent token in the home folder
        agents = [p for p in processes if p.name() in ("ray::DashboardAgent", "ray::RuntimeEnvAgent")]

        driver.kill()
        driver.wait(timeout=30)
        wait_until(lambda: not any(p.is_running() and p.status() != "zombie" for p in agents), 20, what="the agents")
        wait_until(lambda: not private.exists(), 20, what="the private folder's removal")
    finally:
        driver.kill()
        kill_all(processes_under(str(ray_tmp)))


@pytest.mark.slow  # about 12 s: a board that answers after the driver's old 10 s timeout
def test_a_task_s_start_is_not_lost_when_the_board_answers_late(tmp_path, ray_session):
    """Once in six sweeps the Board actor took over 10 s to start: the driver gave up on the drain it had
    sent, and the events that drain took from the board were lost (a running cell stayed `pending`)."""
    import ray

    from rlbench.run.outputs import RunOutputs
    from rlbench.sweep.board import Board
    from rlbench.sweep.grid import make_tasks
    from rlbench.sweep.manifest import RUNNING, new_manifest
    from rlbench.sweep.options import SweepOptions
    from rlbench.sweep.packing import choose_packing
    from rlbench.sweep.progress import Progress
    from rlbench.sweep.scheduler import Driver

    args = sweep.build_parser().parse_args(["--seeds", "1", "-n", "300", "--name", "b"])
    spec = sweep.spec_from_args(args)
    record = new_manifest(spec, "python -m rlbench.sweep ...")
    (task,) = make_tasks(spec.cells(), 1)
    folder = tmp_path / "sweeps" / "b"
    folder.mkdir(parents=True)
    options = SweepOptions(log_root=tmp_path)
    packing = choose_packing({"CPU": 2.0}, 1)
    driver = Driver(
        ray,
        spec,
        options,
        record,
        folder,
        packing,
        sweep.cell_template(args),
        RunOutputs(),
        None,
        "python -m rlbench.sweep ...",
    )
    driver.progress = Progress(record, [task], live=False)
    driver.running = {"a task's ref": (task, 1)}

    class SlowBoard(Board):
        def __init__(self):
            time.sleep(11)
            super().__init__()

    driver.board = ray.remote(SlowBoard).options(num_cpus=0).remote()
    driver.board.started.remote(task.id, "node", 1234)
    state = record.cells[task.cells[0].key]
    wait_until(lambda: driver.read_board() or state.state == RUNNING, 40, what="the start to be recorded")
    assert state.node == "node" and manifest(tmp_path, "b")["cells"][task.cells[0].key]["state"] == RUNNING


@pytest.mark.slow  # 20-40 s: a cell trained to a checkpoint, its process killed, then retried to its end
def test_retry_failed_continues_a_cell_whose_process_was_lost_from_its_checkpoint(tmp_path, ray_session, capsys):
    log = tmp_path / "logs"
    argv = ["--seeds", "1", "-n", "4000", "--save-freq", "500", "--eval-freq", "1000", "--eval-episodes", "2"]
    argv += [*TINY, "--max-retries", "0", "--name", "r", "--no-report", "-f", str(log)]
    staging = log / "sweeps/r/staging"

    def kill_the_worker_after_a_checkpoint():
        wait_until(lambda: list(staging.glob("*/*/*/rl_model_*_steps.zip")), 120, what="a checkpoint")
        (log_file,) = (log / "sweeps/r/logs").glob("*.log")
        pid = int(re.findall(r"^=== .*, pid (\d+), ", log_file.read_text(), re.MULTILINE)[-1])
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_worker_after_a_checkpoint)
    killer.start()
    assert sweep.main(argv) == 1
    killer.join()
    (cell,) = manifest(log, "r")["cells"].values()
    assert cell["state"] == "failed" and cell["error"].startswith("process lost 1 times"), cell
    checkpoints = list(staging.glob("*/*/*/rl_model_*_steps.zip"))
    assert checkpoints
    capsys.readouterr()

    assert sweep.main([*argv, "--retry-failed"]) == 0
    assert "(continued from " in capsys.readouterr().out
    (cell,) = manifest(log, "r")["cells"].values()
    assert cell["state"] == "done" and cell["attempts"] == 2, cell
    text = (log / "sweeps/r" / cell["log"]).read_text()
    assert "=== continuing from checkpoint" in text and "starting from scratch" not in text
    steps = np.load(log / cell["run_dir"] / "evaluations.npz")["timesteps"]
    np.testing.assert_array_equal(steps, np.arange(1000, 4001, 1000))
    assert not staging.exists()


def test_a_task_asking_the_board_about_a_stop_keeps_its_cpus(ray_session):
    """BoardStop asks the board from inside the training task. Had it waited on the answer (even
    `ray.wait(..., timeout=0)`), Ray would lend the task's CPUs to the next pending task while the answer is
    on its way: four runs on two cores, seen on a loaded node. A task holding both CPUs polls a board that
    answers slowly; a one-CPU task submitted after it must not start until it ends."""
    import ray

    from rlbench.sweep.cell import BoardStop

    @ray.remote(num_cpus=0)
    class SlowBoard:
        def stop_reason(self):
            time.sleep(0.05)  # a board on a busy node: most polls find the answer still on its way
            return None

    @ray.remote(num_cpus=2)
    def polling(board, seconds):
        ask = BoardStop(board, "task", poll_s=0.0)  # as often as the loop can ask (the default is 1 s)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            assert ask() is None
            time.sleep(0.002)
        return time.time()

    @ray.remote(num_cpus=1)
    def next_task():
        return time.time()

    board = SlowBoard.remote()
    first = polling.remote(board, 4.0)
    time.sleep(1.0)  # the first task is running and polling
    first_ended, second_started = ray.get([first, next_task.remote()])
    assert second_started >= first_ended, "the next task started while the polling task held every CPU"
