"""Optuna tuning (-optimize): every sampler and pruner on a tiny study, --trial-id, all-pruned
reports, failing trials, and workers sharing one study on a journal file and on PostgreSQL with a
worker killed mid-trial (RELIABILITY E1-E9)."""

import csv
import os
import signal
import subprocess
import sys
import time

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from rlbench.cli.train import main
from rlbench.tuning import spaces
from rlbench.tuning.study import make_storage
from rlbench.tuning.tune import trial_seed
from tests.conftest import REPO_ROOT

TINY = ["--algo", "sac", "--env", "Pendulum-v1", "-n", "300", "--n-evaluations", "2", "--seed", "3",
        "--n-startup-trials", "1", "--verbose", "0",
        "-params", "policy_kwargs:dict(net_arch=[16])", "learning_starts:100"]


def optimize(tmp_path, *argv):
    return main(["-f", str(tmp_path / "logs"), "-optimize", *TINY, *argv])


def trials(tmp_path, storage=None, name="sac_Pendulum-v1"):
    url = storage or str(tmp_path / "logs" / "sac" / "optuna_Pendulum-v1.log")
    return optuna.load_study(storage=make_storage(url), study_name=name).get_trials()


def report_rows(tmp_path):
    (report,) = (tmp_path / "logs" / "sac").glob("report_*[0-9].csv")
    return list(csv.DictReader(report.open()))


@pytest.mark.parametrize("sampler,pruner", [("random", "median"), ("tpe", "halving"), ("cmaes", "hyperband")])
def test_small_study_for_each_sampler_and_pruner(tmp_path, capsys, sampler, pruner):
    """Pruner "none" runs in the tests below."""
    assert optimize(tmp_path, "--n-trials", "3", "--sampler", sampler, "--pruner", pruner) == 0
    done = trials(tmp_path)
    assert len(done) == 3 and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in done)
    assert any(t.state == TrialState.COMPLETE for t in done)
    for t in done:  # each trial: seeded with (seed, number), its hyperparameters recorded
        assert t.user_attrs["seed"] == trial_seed(3, t.number)
        assert t.user_attrs["hyperparams"] == spaces.to_hyperparams("sac", t.params)
        if t.state == TrialState.COMPLETE:
            assert len(t.intermediate_values) == 2 and t.value == t.intermediate_values[1]
    rows = report_rows(tmp_path)
    assert [int(r["number"]) for r in rows] == [0, 1, 2]
    entry_file = next((tmp_path / "logs" / "sac").glob("report_*_best.yml"))
    entry = yaml.safe_load(entry_file.read_text())["Pendulum-v1"]
    best = max((t for t in done if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    assert entry["gamma"] == pytest.approx(1 - best.params["one_minus_gamma"])
    assert entry["policy_kwargs"]["net_arch"]["qf"] == [16]  # -params beat the sampled net_arch, as it ran
    assert (tmp_path / "logs" / "sac").glob("report_*_history.png")
    # The entry is a valid hyperparameter file: training from it works.
    assert main(["-f", str(tmp_path / "again"), "--algo", "sac", "--env", "Pendulum-v1", "-conf", str(entry_file),
                 "-n", "50", "--eval-freq", "-1", "--verbose", "0"]) == 0


def test_trial_id_zero_trains_with_that_trial_and_missing_ids_exit_2(tmp_path, capsys):
    assert optimize(tmp_path, "--n-trials", "2", "--sampler", "random", "--pruner", "none") == 0
    first = trials(tmp_path)[0]
    argv = ["-f", str(tmp_path / "logs"), "--algo", "sac", "--env", "Pendulum-v1", "-n", "50", "--eval-freq", "-1",
            "--verbose", "0"]
    # 0 is a trial id, not "no trial" (RL Zoo ignores it). Without --seed the trial's seed is used, so
    # retraining with the trial's budget and evaluation schedule reproduces its score exactly.
    assert main(["-f", str(tmp_path / "logs"), "--algo", "sac", "--env", "Pendulum-v1", "-n", "300",
                 "--eval-freq", "150", "--verbose", "0", "-params", "policy_kwargs:dict(net_arch=[16])",
                 "learning_starts:100", "--trial-id", "0"]) == 0
    (run_dir,) = (tmp_path / "logs" / "sac").glob("Pendulum-v1_*")
    config = yaml.safe_load((run_dir / "Pendulum-v1" / "config.yml").read_text())
    assert config["batch_size"] == 2 ** first.params["batch_size_pow"]
    assert config["gamma"] == pytest.approx(1 - first.params["one_minus_gamma"])
    assert yaml.safe_load((run_dir / "Pendulum-v1" / "args.yml").read_text())["seed"] == first.user_attrs["seed"]
    evaluations = np.load(run_dir / "evaluations.npz")
    assert evaluations["results"][-1].mean() == first.value
    capsys.readouterr()
    assert main([*argv, "--trial-id", "7"]) == 2
    assert "no such trial" in (err := capsys.readouterr().err) and "0 (COMPLETE), 1 (COMPLETE)" in err
    assert main([*argv, "--trial-id", "0", "--study-name", "nope"]) == 2
    assert "study 'nope' not found" in (err := capsys.readouterr().err) and "sac_Pendulum-v1" in err


def test_all_trials_pruned_still_writes_the_report_and_exits_1(tmp_path, capsys, monkeypatch):
    """E3: every trial pruned (a pruner that always prunes): CSV written, exit 1 'no completed trials'."""
    monkeypatch.setattr(optuna.pruners.NopPruner, "prune", lambda self, study, trial: True)
    assert optimize(tmp_path, "--n-trials", "2", "--pruner", "none", "--sampler", "random") == 1
    assert "no completed trials" in capsys.readouterr().err
    assert [r["state"] for r in report_rows(tmp_path)] == ["PRUNED", "PRUNED"]


def test_invalid_or_non_finite_trials_fail_and_the_study_goes_on(tmp_path, monkeypatch):
    """E7, E9: a sampled combination the config rejects, and a NaN return, make FAIL trials."""
    real = spaces.SPACES["sac"]
    calls = iter(["invalid", "nan", "ok"])

    def convert(params):
        kind = next(calls)
        hyperparams = real[1](params)
        if kind == "invalid":
            hyperparams["tau"] = 1.5  # out of range: ConfigError inside the trial
        if kind == "nan":
            hyperparams["learning_rate"] = float("inf")  # parameters become NaN after the first update
        return hyperparams

    monkeypatch.setitem(spaces.SPACES, "sac", (real[0], convert))
    assert optimize(tmp_path, "--n-trials", "3", "--sampler", "random", "--pruner", "none") == 0
    states = [t.state for t in trials(tmp_path)]
    assert states == [TrialState.FAIL, TrialState.FAIL, TrialState.COMPLETE]


@pytest.mark.parametrize("algo", ["sac", "crossq", "droq"])
def test_every_sampled_combination_is_a_valid_config(algo):
    """The spaces sample in transformed coordinates; each draw must convert to a config the algorithm accepts."""
    from rlbench import hyperparams
    from rlbench.config import normalize_entry
    from rlbench.registry import get_algo

    spec = get_algo(algo)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(50):
        trial = study.ask()
        sampled = spaces.sample(algo, trial)
        assert sampled == spaces.to_hyperparams(algo, trial.params)
        config = spec.build_config(normalize_entry(hyperparams.merge(spec.preset, sampled), "t"), 1, "trial")
        if algo == "crossq":
            assert 256 <= config.critic.hidden[0] <= 2048 and config.critic.batch_norm
        if algo == "droq":
            assert config.critic.layer_norm and 0 < config.critic.dropout_rate <= 0.1
        study.tell(trial, 0.0)


def test_parallel_jobs_are_processes_and_sqlite_storage_works(tmp_path, capsys):
    """--n-jobs 2: two worker processes share the study; an SQLite URL works on one machine (with
    Optuna's warning about several writers) and --optimization-log-path keeps each trial's files."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert optimize(tmp_path, "--n-trials", "2", "--n-jobs", "2", "--storage", url, "--sampler", "random",
                    "--pruner", "none", "--optimization-log-path", str(tmp_path / "trials")) == 0
    assert "SQLite serialises writers" in capsys.readouterr().err
    done = trials(tmp_path, storage=url)
    pids = {t.user_attrs["worker"].split(":")[1] for t in done}
    assert len(done) == 2 and len(pids) == 2 and pids - {str(os.getpid())}  # one trial ran in a spawned process
    for t in done:
        assert (tmp_path / "trials" / f"trial_{t.number}" / "evaluations.npz").is_file()


def worker(tmp_path, storage, name, *argv, log=None):
    return subprocess.Popen([sys.executable, "train.py", "-f", str(tmp_path / "logs"), "-optimize", *TINY,
                             "--storage", storage, "--study-name", name, "--sampler", "random", "--pruner", "none",
                             "--no-optim-plots", *argv],
                            cwd=REPO_ROOT, stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True)


def distributed_study(tmp_path, storage, name):
    """Three workers, --max-total-trials 5, one SIGKILLed inside its first trial; the others finish."""
    logs = [(tmp_path / f"worker{i}.log").open("w") for i in range(3)]
    procs = [worker(tmp_path, storage, name, "--n-trials", "10", "--max-total-trials", "5", "--seed", str(i),
                    log=logs[i]) for i in range(3)]
    study = None
    deadline = time.time() + 300
    while time.time() < deadline:  # wait until the victim's trial is RUNNING, then kill it mid-trial
        time.sleep(0.5)
        try:
            study = optuna.load_study(storage=make_storage(storage), study_name=name)
        except KeyError:
            continue
        if any(t.state == TrialState.RUNNING for t in study.get_trials()):
            break
    victim = procs[0]
    time.sleep(2)
    victim.send_signal(signal.SIGKILL)
    codes = [p.wait(timeout=900) for p in procs[1:]]
    for log in logs:
        log.close()
    assert codes == [0, 0], [(tmp_path / f"worker{i}.log").read_text()[-2000:] for i in (1, 2)]
    return optuna.load_study(storage=make_storage(storage), study_name=name).get_trials()


def check_distributed(done):
    by_state = {s: [t for t in done if t.state == s] for s in TrialState}
    retried = {n for t in done for n in t.system_attrs.get("retry_history", [])}
    assert by_state[TrialState.RUNNING] == [] and by_state[TrialState.WAITING] == []
    failed = by_state[TrialState.FAIL]
    assert len(failed) >= 1 and {t.number for t in failed if not t.user_attrs.get("surplus")} <= retried
    retries = [t for t in done if "retry_history" in t.system_attrs]
    assert retries and all(t.state == TrialState.COMPLETE for t in retries)
    for retry in retries:  # the same parameters as the trial it retries
        original = next(t for t in done if t.number == retry.system_attrs["failed_trial"])
        assert retry.params == original.params
    counted = [t for t in done if t.number not in retried and not t.user_attrs.get("surplus")]
    assert len(counted) == 5  # exactly --max-total-trials


def test_workers_share_a_journal_study_and_a_killed_workers_trial_is_failed_and_retried(tmp_path):
    """E2: the journal file has no Optuna heartbeat; rlbench's own marks the silent trial FAIL."""
    check_distributed(distributed_study(tmp_path, str(tmp_path / "study.log"), "journal"))


@pytest.fixture
def postgres_url():
    url = os.environ.get("RLBENCH_TEST_POSTGRES")
    if not url:
        pytest.fail("RLBENCH_TEST_POSTGRES is not set: .ci/run starts a PostgreSQL server and sets it "
                    "(locally: scripts/start_postgres.sh)")
    return url


def test_workers_share_a_postgresql_study_and_heartbeat_retries_a_killed_workers_trial(tmp_path, postgres_url):
    """E1: RDB storage with Optuna's heartbeat: the killed worker's trial becomes FAIL after the grace
    period and is retried once with the same parameters; exactly --max-total-trials are counted."""
    name = f"pg_{os.getpid()}_{int(time.time())}"
    check_distributed(distributed_study(tmp_path, postgres_url, name))
