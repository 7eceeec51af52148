"""Signals during `train.py -optimize` (RELIABILITY E4, C10): SIGTERM and SIGINT fail the running trials,
stop every worker, write the report and exit 75; a SIGKILLed main process leaves no worker behind."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from rlbench.tuning.study import make_storage
from tests.conftest import REPO_ROOT
from tests.variants import slow_variant

# Trials far longer than the test waits: a signal always finds them running.
LONG_TRIALS = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "-n",
    "200000",
    "--n-evaluations",
    "2",
    "--seed",
    "3",
    "--verbose",
    "0",
    "--sampler",
    "random",
    "--pruner",
    "none",
    "--no-optim-plots",
    "--n-trials",
    "4",
    "-params",
    "policy_kwargs:dict(net_arch=[16])",
    "learning_starts:100",
    "batch_size:8",
    "buffer_size:1000",
]


def start_study(tmp_path, n_jobs):
    log = (tmp_path / "out.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "train.py", "-f", str(tmp_path / "logs"), "-optimize", *LONG_TRIALS, "--n-jobs", str(n_jobs)],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # its own process group, as a shell job or a batch job has
    return proc, log


def running_trials(tmp_path, n_jobs, timeout_s=300):
    """Wait until every worker runs a trial; their numbers."""
    path = tmp_path / "logs" / "sac" / "optuna_Pendulum-v1.log"
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        time.sleep(0.5)
        if path.exists():
            trials = load_trials(path)
            running = [t for t in trials if t.state == TrialState.RUNNING and "worker" in t.user_attrs]
            if len({t.user_attrs["worker"] for t in running}) == n_jobs:
                return {t.number for t in running}
    raise AssertionError(f"no {n_jobs} running trials within {timeout_s} s: {(tmp_path / 'out.log').read_text()}")


def load_trials(path):
    return optuna.load_study(storage=make_storage(str(path)), study_name="sac_Pendulum-v1").get_trials()


def descendants(pid):
    """Live (not zombie) processes below `pid`, from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if fields[0] != "Z":
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def alive(pids):
    alive_pids = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive_pids.append(pid)
    return alive_pids


def still_alive_after(pids, seconds):
    deadline = time.time() + seconds
    while alive(pids) and time.time() < deadline:
        time.sleep(0.2)
    return alive(pids)


@pytest.mark.parametrize(
    "signum,n_jobs,to_group",
    [(signal.SIGTERM, 1, False), (signal.SIGTERM, 2, False), slow_variant(signal.SIGINT, 2, True)],
    ids=["sigterm-1-job", "sigterm-2-jobs", "sigint-to-group-2-jobs"],
)
def test_a_stop_signal_fails_the_running_trials_stops_the_workers_writes_the_report_and_exits_75(
    tmp_path, signum, n_jobs, to_group
):
    """SIGTERM to the main process alone (a `kill PID`) and SIGINT to the whole group (Ctrl-C in a terminal)."""
    proc, log = start_study(tmp_path, n_jobs)
    try:
        running = running_trials(tmp_path, n_jobs)
        workers = descendants(proc.pid)
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
        log.close()
    out = (tmp_path / "out.log").read_text()
    assert code == 75, out
    assert f"{signal.Signals(signum).name} received" in out
    # Each interrupted trial is one line, with no traceback (Optuna logs one for a trial that raised).
    assert "Traceback" not in out and "failed with value None" not in out, out
    interrupted = re.findall(
        r"Trial (\d+) failed with parameters: .* error: TrialInterrupted\('.* at \d+ env steps", out
    )
    assert sorted(map(int, interrupted)) == sorted(running), out
    trials = load_trials(tmp_path / "logs" / "sac" / "optuna_Pendulum-v1.log")
    states = {t.number: t.state for t in trials}
    assert TrialState.RUNNING not in states.values(), states
    assert all(states[number] == TrialState.FAIL for number in running), states
    assert len(trials) == len(running)  # no trial started after the signal
    (report,) = (tmp_path / "logs" / "sac").glob("report_*.csv")
    assert report.read_text().count("FAIL") == len(running)
    assert still_alive_after(workers, 5) == []


def test_a_sigkilled_main_process_leaves_no_worker_running(tmp_path):
    proc, log = start_study(tmp_path, n_jobs=2)
    workers = []
    try:
        running_trials(tmp_path, n_jobs=2)
        workers = descendants(proc.pid)
        assert workers
        proc.kill()
        proc.wait()
        assert still_alive_after(workers, 5) == []
    finally:
        proc.kill()
        for pid in alive(workers):  # orphans (the old code's): not left to run on after the test
            os.kill(pid, signal.SIGKILL)
        log.close()


def test_a_worker_whose_parent_died_before_it_could_watch_exits_at_once():
    """The race the kernel's parent-death signal misses: the parent died between the spawn and the prctl
    call, so the worker already has another parent. Here the expected parent pid is not the real one."""
    code = (
        "import time; from rlbench.tuning.processes import exit_with_parent; exit_with_parent(2**22 + 1); "
        "time.sleep(60)"
    )  # pid_max is at most 2**22: no process has that pid
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (1, "") and time.monotonic() - started < 50
