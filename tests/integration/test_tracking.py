"""W&B (offline, fallback, exit codes, resume) and TensorBoard: the files are read back and compared
with what the run printed and saved (RELIABILITY F1-F6)."""

import csv
import http.server
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

from rlbench.cli.train import EXIT_INTERRUPTED, main
from rlbench.loggers.tracking import LOG_FLUSH_INTERVAL_S
from rlbench.redact import redact
from rlbench.tuning.study import make_storage
from tests.conftest import REPO_ROOT, TINY_LEARNER
from tests.run_files import sbx_progress_keys, tensorboard_scalars, wandb_records, wandb_run

TINY = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "--seed",
    "11",
    "-params",
    *TINY_LEARNER,
]


def isolated_env(tmp_path, **extra):
    """No credentials, no settings from this machine's home; W&B files under tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, "HOME": str(tmp_path), "WANDB_DIR": str(tmp_path), **extra}


def train_process(tmp_path, *argv, env, check=True):
    proc = subprocess.run(
        [sys.executable, "train.py", "-f", str(tmp_path / "logs"), *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def start_until(tmp_path, env, marker, *argv):
    """Start train.py with stdout to a log; return (process, log) once `marker` is printed."""
    log = tmp_path / "out.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "logs"), *TINY, *argv, "--track"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    deadline = time.time() + 300
    while marker not in log.read_text() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    return proc, log


def offline_runs(tmp_path):
    return sorted((tmp_path / "wandb").glob("offline-run-*"))


def test_offline_run_files_hold_the_evaluations_config_and_seed_the_run_saved(tmp_path):
    argv = [
        *TINY,
        "-n",
        "600",
        "--eval-freq",
        "200",
        "--eval-episodes",
        "2",
        "--log-interval",
        "1",
        "--track",
        "--wandb-project-name",
        "rlbench-test",
        "--wandb-group",
        "g",
        "-tags",
        "0.18.0",
        "ent-coef",
        "-tb",
        str(tmp_path / "tb"),
    ]
    proc = train_process(tmp_path, *argv, env=isolated_env(tmp_path, WANDB_MODE="offline"))
    assert "upload it with: wandb sync" in proc.stderr
    run_dir = tmp_path / "logs" / "sac" / "Pendulum-v1_1"
    evaluations = np.load(run_dir / "evaluations.npz")
    means = evaluations["results"].mean(axis=1)
    (wandb_dir,) = offline_runs(tmp_path)
    run = wandb_run(wandb_dir)

    logged = [(row["global_step"], row["eval/mean_reward"]) for row in run["history"] if "eval/mean_reward" in row]
    assert [step for step, _ in logged] == evaluations["timesteps"].tolist() == [200, 400, 600]
    np.testing.assert_allclose([value for _, value in logged], means, rtol=1e-12)
    for line, (step, value) in zip([x for x in proc.stdout.splitlines() if x.startswith("Eval")], logged, strict=True):
        assert line.startswith(f"Eval num_timesteps={step}, episode_reward={value:.2f}")
    train_rows = [row for row in run["history"] if "train/critic_loss" in row]
    assert train_rows and all("rollout/ep_rew_mean" in row and "time/fps" in row for row in train_rows)
    # time/fps is an integer, as SB3 logs it: in W&B, progress.csv and the console (issue 44 item 9).
    assert all(type(row["time/fps"]) is int for row in train_rows), [row["time/fps"] for row in train_rows]
    with (run_dir / "progress.csv").open() as stream:
        csv_fps = [row["time/fps"] for row in csv.DictReader(stream) if row["time/fps"]]
    assert csv_fps and all(value.isdigit() for value in csv_fps), csv_fps
    console_fps = re.findall(r"^\| time/fps +\| +(\S+) \|$", proc.stdout, re.MULTILINE)
    assert console_fps and all(value.isdigit() for value in console_fps), console_fps

    saved_args = yaml.safe_load((run_dir / "Pendulum-v1" / "args.yml").read_text())
    saved_config = yaml.safe_load((run_dir / "Pendulum-v1" / "config.yml").read_text())
    config = run["config"]
    assert config["seed"] == saved_args["seed"] == 11 and config["args"]["seed"] == 11
    for key, value in saved_config.items():
        assert config[key] == value, key
    assert config["command"].endswith(" ".join(argv[-4:])) and config["backend"] == "cpu"
    assert config["versions"]["jax"] and len(config["git_commit"]) == 40  # this checkout's commit
    assert run["summary"]["best_eval_mean_reward"] == pytest.approx(means.max())
    assert run["summary"]["final_eval_mean_reward"] == pytest.approx(means[-1])
    assert run["exit_code"] == 0 and not run["preempting"]
    assert (wandb_dir / "files" / "evaluations.npz").is_file() and (wandb_dir / "files" / "Pendulum-v1.zip").is_file()
    # Each file once in the offline run: one link in files/, no second link or copy (issue 32 item 14), and so
    # no "Symlinked" line from W&B (issue 20 item 17: at most one for both files).
    for saved in (run_dir / "evaluations.npz", run_dir / "Pendulum-v1.zip"):
        holding = [p for p in wandb_dir.rglob("*") if p.is_file() and p.read_bytes() == saved.read_bytes()]
        assert [p.relative_to(wandb_dir) for p in holding] == [Path("files") / saved.name]
    assert "Symlinked" not in proc.stdout + proc.stderr

    scalars = tensorboard_scalars(tmp_path / "tb" / "Pendulum-v1" / "sac_1")
    assert [step for step, _ in scalars["eval/mean_reward"]] == [200, 400, 600]
    np.testing.assert_allclose([v for _, v in scalars["eval/mean_reward"]], means, rtol=1e-6)  # float32 in TB
    assert len(scalars["train/critic_loss"]) == len(train_rows)
    # The keys of an SBX run's progress.csv, on W&B's and TensorBoard's panels too (issue 35 item 4).
    assert set(sbx_progress_keys("sac")) <= {key for row in run["history"] for key in row} & set(scalars)


def test_without_network_falls_back_to_offline_within_seconds(tmp_path):
    """A key but no reachable server (a refused port): offline at once, not after W&B's own retries (~14 s)."""
    env = isolated_env(tmp_path, WANDB_API_KEY="0" * 40, WANDB_BASE_URL="http://127.0.0.1:9")
    start = time.perf_counter()
    proc = train_process(tmp_path, *TINY, "-n", "50", "--eval-freq", "-1", "--verbose", "0", "--track", env=env)
    elapsed = time.perf_counter() - start
    assert "online start failed after 0 s (127.0.0.1:9 unreachable: Connection refused): logging offline" in proc.stderr
    assert "wandb sync" in proc.stderr
    assert elapsed < 90, elapsed
    (wandb_dir,) = offline_runs(tmp_path)
    assert wandb_run(wandb_dir)["exit_code"] == 0


class RejectingServer(http.server.BaseHTTPRequestHandler):
    """A W&B server that refuses every request as unauthorized: a wrong or revoked API key."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"errors": [{"message": "invalid API key"}]}')

    do_GET = do_POST

    def log_message(self, *args):
        pass


def test_a_server_refusing_the_key_falls_back_to_offline(tmp_path):
    """The server answers, W&B's online start raises: the run logs offline and ends as usual."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RejectingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        env = isolated_env(tmp_path, WANDB_API_KEY="0" * 40, WANDB_BASE_URL=url)
        proc = train_process(tmp_path, *TINY, "-n", "50", "--eval-freq", "-1", "--verbose", "0", "--track", env=env)
    finally:
        server.shutdown()
    assert re.search(r"online start failed after \d+ s \(\w+Error: .*invalid API key.*\): logging offline", proc.stderr)
    assert "unreachable" not in proc.stderr and "wandb sync" in proc.stderr
    (wandb_dir,) = offline_runs(tmp_path)
    assert wandb_run(wandb_dir)["exit_code"] == 0


def test_no_credentials_goes_offline_at_once(tmp_path):
    proc = train_process(
        tmp_path, *TINY, "-n", "50", "--eval-freq", "-1", "--verbose", "0", "--track", env=isolated_env(tmp_path)
    )
    assert "no API key" in proc.stderr and "online start failed" not in proc.stderr
    assert len(offline_runs(tmp_path)) == 1


def test_sigterm_finishes_the_run_as_preempted_and_resume_continues_its_id(tmp_path):
    env = isolated_env(tmp_path, WANDB_MODE="offline")
    proc, log = start_until(
        tmp_path, env, "Eval num_timesteps=300", "-n", "5000", "--eval-freq", "300", "--eval-episodes", "1"
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-2000:]
    (first_dir,) = offline_runs(tmp_path)
    first = wandb_run(first_dir)
    assert first["exit_code"] == EXIT_INTERRUPTED and first["preempting"]
    (checkpoint,) = (tmp_path / "logs" / "sac" / "Pendulum-v1_1").glob("rl_model_*_steps.zip")
    steps = int(checkpoint.name.split("_")[2])
    train_process(
        tmp_path,
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-i",
        str(checkpoint),
        "-n",
        "300",
        "--eval-freq",
        "300",
        "--eval-episodes",
        "1",
        "--track",
        env=env,
    )
    second_dir = next(d for d in offline_runs(tmp_path) if d != first_dir)
    second = wandb_run(second_dir)
    assert second["id"] == first["id"] and second["exit_code"] == 0
    logged_steps = [row["global_step"] for row in second["history"] if "eval/mean_reward" in row]
    # The same step axis, continued. A SIGTERM that lands during the evaluation at the checkpoint's step cuts
    # it short, and the resumed run makes that evaluation first, at that step (training_loop.evaluation_cut_short).
    assert logged_steps and min(logged_steps) >= steps and max(logged_steps) > steps


def test_track_without_wandb_installed_exits_2_with_the_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    assert main(["-f", str(tmp_path / "logs"), *TINY, "-n", "50", "--track"]) == 2
    assert "a dependency of rlbench: pip install -e ." in capsys.readouterr().err
    assert not (tmp_path / "logs").exists() and not Path(tmp_path / "wandb").exists()


def test_disabled_mode_makes_no_run_files(tmp_path):
    """F2: WANDB_MODE=disabled is obeyed: training runs, no W&B files."""
    train_process(
        tmp_path,
        *TINY,
        "-n",
        "50",
        "--eval-freq",
        "-1",
        "--verbose",
        "0",
        "--track",
        env=isolated_env(tmp_path, WANDB_MODE="disabled"),
    )
    assert not offline_runs(tmp_path) and (tmp_path / "logs" / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip").exists()


def test_failure_finishes_the_run_with_exit_code_1(tmp_path):
    """F6: an env that raises: exit 1, and the W&B run records exit code 1 (Failed, not Crashed)."""
    proc = train_process(
        tmp_path,
        "--algo",
        "sac",
        "--env",
        "tests.envs:Crash-v0",
        "--env-kwargs",
        "at_step:20",
        "-n",
        "100",
        "--eval-freq",
        "-1",
        "--verbose",
        "0",
        "--track",
        "-params",
        "policy_kwargs:dict(net_arch=[8])",
        env=isolated_env(tmp_path, WANDB_MODE="offline"),
        check=False,
    )
    assert proc.returncode == 1 and "CrashEnv failed on purpose" in proc.stderr
    (wandb_dir,) = offline_runs(tmp_path)
    assert wandb_run(wandb_dir)["exit_code"] == 1


def test_sigkilled_trainer_leaves_an_offline_run_readable_to_its_last_record(tmp_path):
    """F3: kill -9 mid-run: the .wandb log reads back, with the evaluations logged before the kill."""
    proc, _ = start_until(
        tmp_path,
        isolated_env(tmp_path, WANDB_MODE="offline"),
        "Eval num_timesteps=600",
        "-n",
        "20000",
        "--eval-freq",
        "200",
        "--eval-episodes",
        "1",
    )
    time.sleep(LOG_FLUSH_INTERVAL_S + 2)  # W&B's service process writes its log every LOG_FLUSH_INTERVAL_S
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    (wandb_dir,) = offline_runs(tmp_path)
    run = wandb_run(wandb_dir)
    steps = [row["global_step"] for row in run["history"] if "eval/mean_reward" in row]
    assert steps[:3] == [200, 400, 600] and run["exit_code"] is None  # no exit record: it was killed


def test_a_storage_password_is_in_no_file_of_the_offline_run(tmp_path, postgres_url):
    """Issue 32 item 13: W&B records the command line itself (its run metadata, shown as the run's command).
    Trained with --trial-id from a PostgreSQL study, the --storage password is in no byte of any file the run
    leaves: W&B's offline run (its run file, logs, saved files), W&B's own logs, the run folder."""
    password = "Fake-Pa55word-9c2d"
    url = re.sub(r"://([^:@/]*)(:[^@/]*)?@", rf"://\1:{password}@", postgres_url, count=1)
    assert password in url
    name = f"track_{os.getpid()}_{int(time.time())}"
    study = optuna.create_study(storage=make_storage(postgres_url), study_name=name, direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=0.0, user_attrs={"hyperparams": {"gamma": 0.98}, "seed": 5}))
    argv = ["-n", "200", "--trial-id", "0", "--storage", url, "--study-name", name, "--track"]
    train_process(tmp_path, *TINY, *argv, env=isolated_env(tmp_path, WANDB_MODE="offline"))
    (wandb_dir,) = offline_runs(tmp_path)
    (log,) = wandb_dir.glob("run-*.wandb")
    recorded = [list(r.environment.args) for r in wandb_records(log) if r.WhichOneof("record_type") == "environment"]
    assert [redact(url), "--study-name"] in [args[i : i + 2] for args in recorded for i in range(len(args))]
    files = [path for path in tmp_path.rglob("*") if path.is_file()]  # links followed: W&B links its core log
    assert any(path.suffix == ".wandb" for path in files) and any("debug" in path.name for path in files)
    assert [path for path in files if password.encode() in path.read_bytes()] == []
