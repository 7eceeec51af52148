"""Optuna tuning (-optimize): every sampler and pruner on a tiny study, --trial-id, all-pruned
reports, failing trials, workers sharing one study on a journal file and on PostgreSQL with a
worker killed mid-trial (RELIABILITY E1-E9), sampler seeds per worker, --sampler auto offline, and
storage passwords kept out of output and the database. Signals: test_tuning_signals.py."""

import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import optuna
import psutil
import pytest
import yaml
from optuna.trial import TrialState

from rlbench.cli.train import main
from rlbench.errors import ConfigError
from rlbench.redact import redact
from rlbench.tuning import samplers, spaces
from rlbench.tuning.study import make_storage
from rlbench.tuning.tune import trial_seed
from tests.conftest import REPO_ROOT, closed_port
from tests.ray_cluster import wait_until

TINY = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "-n",
    "300",
    "--n-evaluations",
    "2",
    "--seed",
    "3",
    "--n-startup-trials",
    "1",
    "--verbose",
    "0",
    "-params",
    "policy_kwargs:dict(net_arch=[16])",
    "learning_starts:100",
]


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
    # Two trials: the first is random (--n-startup-trials 1), the second the sampler's own.
    assert optimize(tmp_path, "--n-trials", "2", "--sampler", sampler, "--pruner", pruner, *SMALL_TRIALS) == 0
    done = trials(tmp_path)
    assert len(done) == 2 and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in done)
    assert any(t.state == TrialState.COMPLETE for t in done)
    for t in done:  # each trial: seeded with (seed, number), its hyperparameters recorded
        assert t.user_attrs["seed"] == trial_seed(3, t.number)
        assert t.user_attrs["hyperparams"] == spaces.to_hyperparams("sac", t.params)
        if t.state == TrialState.COMPLETE:
            assert len(t.intermediate_values) == 2 and t.value == t.intermediate_values[1]
    rows = report_rows(tmp_path)
    assert [int(r["number"]) for r in rows] == [0, 1]
    # What each trial trained with (issue 32 item 13): -params' net_arch over the sampled one, resolved.
    trained = {"net_arch": {"pi": [16], "qf": [16]}}
    assert [json.loads(r["hyperparams"])["policy_kwargs"] for r in rows] == [trained, trained]
    (best_line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Best trial")]
    assert f"'policy_kwargs': {trained}" in best_line
    entry_file = next((tmp_path / "logs" / "sac").glob("report_*_best.yml"))
    entry = yaml.safe_load(entry_file.read_text())["Pendulum-v1"]
    best = max((t for t in done if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    assert entry["gamma"] == pytest.approx(1 - best.params["one_minus_gamma"])
    assert entry["policy_kwargs"]["net_arch"]["qf"] == [16]  # -params beat the sampled net_arch, as it ran
    assert (tmp_path / "logs" / "sac").glob("report_*_history.png")
    # The entry is a valid hyperparameter file: training from it works.
    assert (
        main(
            [
                "-f",
                str(tmp_path / "again"),
                "--algo",
                "sac",
                "--env",
                "Pendulum-v1",
                "-conf",
                str(entry_file),
                "-n",
                "50",
                "--eval-freq",
                "-1",
                "--verbose",
                "0",
            ]
        )
        == 0
    )


def test_trial_id_zero_trains_with_that_trial_and_missing_ids_exit_2(tmp_path, capsys):
    assert optimize(tmp_path, "--n-trials", "2", "--sampler", "random", "--pruner", "none") == 0
    first = trials(tmp_path)[0]
    argv = [
        "-f",
        str(tmp_path / "logs"),
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-n",
        "50",
        "--eval-freq",
        "-1",
        "--verbose",
        "0",
    ]
    # 0 is a trial id, not "no trial" (RL Zoo ignores it). Without --seed the trial's seed is used, so
    # retraining with the trial's budget and evaluation schedule reproduces its score exactly.
    assert (
        main(
            [
                "-f",
                str(tmp_path / "logs"),
                "--algo",
                "sac",
                "--env",
                "Pendulum-v1",
                "-n",
                "300",
                "--eval-freq",
                "150",
                "--verbose",
                "0",
                "-params",
                "policy_kwargs:dict(net_arch=[16])",
                "learning_starts:100",
                "--trial-id",
                "0",
            ]
        )
        == 0
    )
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


def test_every_algorithm_has_rl_zoos_search_space_joined_by_its_name():
    from rlbench.config.registry import ALGORITHMS

    assert set(spaces.SPACES) == set(ALGORITHMS)


@pytest.mark.parametrize("algo", ["sac", "crossq", "droq", "td3", "tqc", "ddpg", "ppo", "a2c"])
def test_every_sampled_combination_is_a_valid_config(algo):
    """The spaces sample in transformed coordinates; each draw must convert to a config the algorithm accepts."""
    from rlbench.config import hyperparams
    from rlbench.config.entry import normalize_entry
    from rlbench.config.registry import get_algo

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
        if algo == "td3":  # RL Zoo's noise choices, None among them
            noise = config.action_noise
            assert (
                sampled["noise_type"] is None
                if noise is None
                else (noise.kind, noise.std) == tuple(sampled[key] for key in ("noise_type", "noise_std"))
            )
        study.tell(trial, 0.0)


def test_parallel_jobs_are_processes_and_sqlite_storage_works(tmp_path, capsys):
    """--n-jobs 2: two worker processes share the study; an SQLite URL works on one machine (with
    Optuna's warning about several writers) and --optimization-log-path keeps each trial's files."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert (
        optimize(
            tmp_path,
            "--n-trials",
            "2",
            "--n-jobs",
            "2",
            "--storage",
            url,
            "--sampler",
            "random",
            "--pruner",
            "none",
            "--optimization-log-path",
            str(tmp_path / "trials"),
        )
        == 0
    )
    assert "SQLite serialises writers" in capsys.readouterr().err
    done = trials(tmp_path, storage=url)
    pids = {t.user_attrs["worker"].split(":")[1] for t in done}
    assert len(done) == 2 and len(pids) == 2 and pids - {str(os.getpid())}  # one trial ran in a spawned process
    for t in done:
        assert (tmp_path / "trials" / f"trial_{t.number}" / "evaluations.npz").is_file()


def worker(tmp_path, storage, name, *argv, log=None):
    return subprocess.Popen(
        [
            sys.executable,
            "train.py",
            "-f",
            str(tmp_path / "logs"),
            "-optimize",
            *TINY,
            "--storage",
            storage,
            "--study-name",
            name,
            "--sampler",
            "random",
            "--pruner",
            "none",
            "--no-optim-plots",
            "--heartbeat-grace",
            "5",
            *argv,
        ],
        cwd=REPO_ROOT,
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        text=True,
    )


# What these tests check is the bookkeeping of workers, not what a trial learns: -params (which wins over the
# sampled values) keeps every trial as small as TINY's networks, whatever batch size and train_freq it drew,
# and each evaluation is one episode.
SMALL_TRIALS = [
    "-n",
    "200",
    "--eval-episodes",
    "1",
    "-params",
    "policy_kwargs:dict(net_arch=[16])",
    "learning_starts:100",
    "batch_size:32",
    "train_freq:1",
    "gradient_steps:1",
]


def distributed_study(tmp_path, storage, name):
    """Three workers, --max-total-trials 2: the first is SIGKILLed inside its first trial, then the other two
    share the study and finish it (one of them fails and retries the dead worker's trial)."""
    logs = [(tmp_path / f"worker{i}.log").open("w") for i in range(3)]
    budget = ["--n-trials", "10", "--max-total-trials", "2", *SMALL_TRIALS]
    # The victim's trials are long (-n 3000), so that it is surely inside one when it is killed, even when
    # the session's compilation cache makes short trials take under a second.
    victim = worker(tmp_path, storage, name, *budget, "--seed", "0", "-n", "3000", log=logs[0])
    deadline, polled = time.time() + 300, make_storage(storage)  # one storage: one connection to a server
    while time.time() < deadline:  # wait until the victim's trial is RUNNING, then kill it mid-trial
        time.sleep(0.2)
        try:
            study = optuna.load_study(storage=polled, study_name=name)
        except KeyError:
            continue
        if study.get_trials(states=(TrialState.RUNNING,)):
            break
    time.sleep(1)  # into the trial's training, not its first journal writes (a killed writer holds the lock)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    procs = [worker(tmp_path, storage, name, *budget, "--seed", str(i), log=logs[i]) for i in (1, 2)]
    codes = [p.wait(timeout=900) for p in procs]
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
    assert len(counted) == 2  # exactly --max-total-trials


def test_workers_share_a_journal_study_and_a_killed_workers_trial_is_failed_and_retried(tmp_path):
    """E2: the journal file has no Optuna heartbeat; rlbench's own marks the silent trial FAIL."""
    check_distributed(distributed_study(tmp_path, str(tmp_path / "study.log"), "journal"))


def test_workers_share_a_postgresql_study_and_heartbeat_retries_a_killed_workers_trial(tmp_path, postgres_url):
    """E1: RDB storage with Optuna's heartbeat: the killed worker's trial becomes FAIL after the grace
    period and is retried once with the same parameters; exactly --max-total-trials are counted."""
    name = f"pg_{os.getpid()}_{int(time.time())}"
    check_distributed(distributed_study(tmp_path, postgres_url, name))


def first_params(storage, name):
    return [t.params for t in optuna.load_study(storage=make_storage(storage), study_name=name).get_trials()]


def test_the_same_seed_reproduces_a_fresh_study_and_a_rerun_draws_new_trials(tmp_path):
    """Issue 20 item 12: a fresh single-worker study with a fixed --seed is reproducible; rerunning the
    command on the same study (a retry, another machine) must not draw the trials it already ran."""
    argv = ["--n-trials", "1", "--sampler", "random", "--pruner", "none", "--no-optim-plots"]
    first, second = str(tmp_path / "first.log"), str(tmp_path / "second.log")
    assert optimize(tmp_path, *argv, "--storage", first) == 0
    assert optimize(tmp_path, *argv, "--storage", second) == 0
    assert first_params(first, "sac_Pendulum-v1") == first_params(second, "sac_Pendulum-v1")
    assert optimize(tmp_path, *argv, "--storage", first) == 0
    trial_0, trial_1 = first_params(first, "sac_Pendulum-v1")
    assert trial_0 != trial_1


def test_two_processes_with_the_same_seed_draw_different_trials_and_log_the_study_once(tmp_path):
    """Issue 20 items 12 and 17: the same command started on two machines (two processes, one storage, one --seed)."""
    storage = str(tmp_path / "study.log")
    logs = [(tmp_path / f"worker{i}.log").open("w") for i in range(2)]
    procs = [worker(tmp_path, storage, "shared", "--n-trials", "1", log=log) for log in logs]
    codes = [p.wait(timeout=600) for p in procs]
    for log in logs:
        log.close()
    outputs = [(tmp_path / f"worker{i}.log").read_text() for i in range(2)]
    assert codes == [0, 0], outputs
    trial_0, trial_1 = first_params(storage, "shared")
    assert trial_0 != trial_1
    for out in outputs:  # each process: Optuna's one line about the study, never both
        assert out.count("A new study created") + out.count("Using an existing study") == 1, out


def test_sampler_auto_offline_fails_with_one_line_naming_the_other_samplers(tmp_path, capsys, monkeypatch):
    """Issue 20 item 13: OptunaHub fetches AutoSampler's code from GitHub at first use. A proxy on a closed
    local port makes this test offline on any machine: exit 2 with one line, before any study file exists."""
    offline(monkeypatch, tmp_path, f"http://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    assert optimize(tmp_path, "--n-trials", "1", "--sampler", "auto") == 2
    assert time.monotonic() - started < 60
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --sampler auto: cannot load OptunaHub's AutoSampler")
    assert "use --sampler random, tpe, cmaes instead" in err
    assert not (tmp_path / "logs").exists()


def offline(monkeypatch, tmp_path, proxy):
    """Every route out of optunahub (git, the GitHub API through requests) goes through `proxy`; nothing cached."""
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)  # no user http.proxy overriding the proxy above
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    monkeypatch.setenv("OPTUNAHUB_CACHE_HOME", str(tmp_path / "optunahub-cache"))


def test_sampler_auto_gives_up_in_bounded_time_on_a_network_that_never_answers(tmp_path, monkeypatch):
    """A proxy that accepts connections and never answers (a network that drops packets): the fetch is
    abandoned after AUTO_FETCH_TIMEOUT_S and nothing it started (git) is left running."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    proxy = f"http://127.0.0.1:{silent.getsockname()[1]}"
    offline(monkeypatch, tmp_path, proxy)
    monkeypatch.setattr(samplers, "AUTO_FETCH_TIMEOUT_S", 3)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"no answer within 3 s.*use --sampler random, tpe, cmaes instead"):
        samplers.fetch_auto_sampler()
    assert time.monotonic() - started < 30
    # What the fetch started (the loader, git) is found by this test's own proxy in its environment: another
    # test fetching AutoSampler at the same time in another xdist worker has the same command line but not
    # this port. A killed process leaves /proc only once it has run its exit, which on a loaded machine can
    # take a moment: wait for that, bounded, with the proxy still open, so that a git left running stays
    # blocked on it and is found.
    try:
        wait_until(lambda: not any_process_with("https_proxy", proxy), 10, 0.1, "the fetch's processes to exit")
    finally:
        silent.close()


def any_process_with(name: str, value: str) -> bool:
    """Whether a process other than this one has `name` set to `value` in its environment."""
    return any(
        process.pid != os.getpid() and (process.info["environ"] or {}).get(name) == value
        for process in psutil.process_iter(["environ"])
    )


FAKE_PASSWORD = "Fake-Pa55word-4e1b"


def test_an_unreachable_storage_is_one_line_with_the_password_masked(tmp_path):
    """Item 2 of issue 20: the --storage password never appears in what tuning prints (here: the connection
    error, in a real process, where a traceback or warning would show)."""
    url = f"postgresql://rlbench:{FAKE_PASSWORD}@127.0.0.1:{closed_port()}/optuna"
    for mode, code in (["-optimize"], 1), (["--trial-id", "0"], 2):  # --trial-id: before any run folder
        done = subprocess.run(
            [sys.executable, "train.py", "-f", str(tmp_path / "logs"), *mode, *TINY, "--storage", url],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == code, done.stderr
        assert "--storage postgresql://rlbench:***@127.0.0.1:" in done.stderr and "refused" in done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert FAKE_PASSWORD not in done.stdout + done.stderr
    assert not (tmp_path / "logs").exists()


def test_the_storage_password_is_stored_and_printed_nowhere(tmp_path, capsys, postgres_url):
    """The study's `command` attribute lives in the shared database: masked there, in the banner and in every
    trial attribute. The test server trusts local connections, so any password is accepted."""
    # The URL's user with a password added (a server's own URL may have none, or an empty one).
    url = re.sub(r"://([^:@/]*)(:[^@/]*)?@", rf"://\1:{FAKE_PASSWORD}@", postgres_url, count=1)
    masked = redact(url)
    assert FAKE_PASSWORD in url and FAKE_PASSWORD not in masked
    name = f"redact_{os.getpid()}_{int(time.time())}"
    assert (
        optimize(
            tmp_path,
            "--n-trials",
            "1",
            "--sampler",
            "random",
            "--pruner",
            "none",
            "--no-optim-plots",
            "--storage",
            url,
            "--study-name",
            name,
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert FAKE_PASSWORD not in out + err and masked in out
    study = optuna.load_study(storage=make_storage(postgres_url), study_name=name)
    assert masked in study.user_attrs["command"]
    study_system_attrs = study._storage.get_study_system_attrs(study._study_id)
    stored = repr([study.user_attrs, study_system_attrs, [(t.user_attrs, t.system_attrs) for t in study.trials]])
    assert FAKE_PASSWORD not in stored


def test_a_trial_failed_as_stale_by_another_worker_does_not_crash_its_own_worker(tmp_path):
    """On an overloaded machine a heartbeat can starve: another worker then fails the running trial as
    stale. The trial's own worker must drop its result and go on (Optuna's tell asserted "Should not
    reach." and the worker exited 1; seen with three pytest workers on two cores)."""
    storage, name = str(tmp_path / "study.log"), "stale"
    with (tmp_path / "worker.log").open("w") as log:
        proc = worker(tmp_path, storage, name, "--n-trials", "2", "-n", "3000", log=log)
        running, deadline = [], time.time() + 120
        while not running and time.time() < deadline:
            time.sleep(0.2)
            try:
                study = optuna.load_study(storage=make_storage(storage), study_name=name)
            except KeyError:
                continue
            running = study.get_trials(states=(TrialState.RUNNING,))
        assert running, "no trial started"
        # What fail_stale_journal_trials in another worker does to a trial silent for its grace period.
        study._storage.set_trial_state_values(running[0]._trial_id, TrialState.FAIL)
        assert proc.wait(timeout=300) == 0, (tmp_path / "worker.log").read_text()[-2000:]
    assert "failed as stale by another worker, its result dropped" in (tmp_path / "worker.log").read_text()
    trials = optuna.load_study(storage=make_storage(storage), study_name=name).get_trials()
    assert trials[0].state == TrialState.FAIL and len(trials) == 2


def test_a_heartbeat_grace_shorter_than_two_beats_exits_2_before_writing(tmp_path, capsys):
    """A grace under two heartbeat intervals would fail live trials as stale: one line, nothing written."""
    assert optimize(tmp_path, "--n-trials", "1", "--heartbeat-grace", "3") == 2
    err = capsys.readouterr().err
    assert err == "error: --heartbeat-grace: expected at least 4 s (twice the 2 s heartbeat interval), got 3\n"
    assert not (tmp_path / "logs").exists()


def test_n_seeds_scores_each_trial_by_the_mean_over_its_seeds(tmp_path):
    """Issue 16 item 7: -optimize --n-seeds 3 trains each trial's three seeds in one process; every value
    reported to the pruner, and the objective, is the mean over the seeds of their evaluation means
    (read back from each seed's evaluations.npz under --optimization-log-path)."""
    argv = ["--n-trials", "1", "--sampler", "random", "--pruner", "none", "--no-optim-plots", "--n-seeds", "3"]
    assert optimize(tmp_path, *argv, "--optimization-log-path", str(tmp_path / "trials")) == 0
    (trial,) = trials(tmp_path)
    seed = trial.user_attrs["seed"]
    folders = [tmp_path / "trials" / "trial_0" / f"seed_{seed + index}" for index in range(3)]
    means = np.array([np.load(folder / "evaluations.npz")["results"].mean(axis=1) for folder in folders])  # [3, 2]
    assert means.shape == (3, 2) and len(set(means[:, -1])) == 3  # three different seeds
    np.testing.assert_allclose([trial.intermediate_values[i] for i in (0, 1)], means.mean(axis=0), rtol=1e-12)
    assert trial.value == pytest.approx(means[:, -1].mean(), rel=1e-12)
    assert trial.user_attrs["seed_values"] == pytest.approx(means[:, -1].tolist(), rel=1e-12)


def test_without_matplotlib_the_report_notes_the_missing_plots_and_exits_0(tmp_path):
    """Issue 32 item 9: a plain install (no tuning extra) has no matplotlib. A package on PYTHONPATH that
    raises what a missing one raises hides the installed matplotlib from this train.py process."""
    shim = tmp_path / "no_matplotlib" / "matplotlib"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'matplotlib'\", name=__name__)\n")
    path = os.pathsep.join([str(shim.parent), REPO_ROOT, os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "train.py", "-f", str(tmp_path / "logs"), "-optimize", *TINY, "--n-trials", "1"],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    notes = [line for line in done.stdout.splitlines() if line.startswith("Note")]
    assert notes == [
        'Note: plots skipped, matplotlib is not installed: pip install -e ".[tuning]" (or pip install matplotlib) '
        "for them, --no-optim-plots to skip them without this note"
    ]
    assert "Traceback" not in done.stderr and re.search(r"^Best trial 0: value -?\d", done.stdout, re.MULTILINE)
    reports = sorted(path.name for path in (tmp_path / "logs" / "sac").glob("report_*"))
    assert [re.sub(r"^report_.*_\d+", "", name) for name in reports] == [".csv", "_best.json", "_best.yml"]
    assert [int(row["number"]) for row in report_rows(tmp_path)] == [0]
