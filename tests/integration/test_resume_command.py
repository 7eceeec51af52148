"""What continues a stopped run (issue 44 item 9): the resume command a stop prints and writes into command.txt
continues the run with the flags that shaped it (followed verbatim, in a real process); the new folder holds
the whole evaluation history; `-i` names a run folder as enjoy.py's --load-last-checkpoint does; the final
evaluation at a run's end leaves a resumed run bit for bit what an uninterrupted one is."""

import hashlib
import shlex
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
import yaml

from rlbench.cli.train import EXIT_INTERRUPTED, main
from rlbench.store.checkpoint import read_checkpoint
from tests.conftest import REPO_ROOT, TINY_LEARNER
from tests.variants import slow_variant

SAC_TINY = ["--algo", "sac", "--env", "Pendulum-v1", "--seed", "7", "--log-interval", "-2", "-params", *TINY_LEARNER]
CROSSQ_TINY = [
    *["--algo", "crossq", "--env", "Pendulum-v1", "--seed", "7", "--log-interval", "-2", "-params"],
    *["policy_kwargs:dict(net_arch=dict(pi=[16], qf=[32]))", "learning_starts:100", "batch_size:32"],
]


def wait_until(predicate, what, timeout=300):
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def state_hash(path):
    return hashlib.sha256(zipfile.ZipFile(path).read("state.msgpack")).hexdigest()


@pytest.mark.parametrize(
    "stop,learner",
    [(signal.SIGINT, SAC_TINY), slow_variant(signal.SIGTERM, CROSSQ_TINY)],
    ids=["SIGINT-sac", "SIGTERM-crossq"],
)
def test_the_printed_resume_command_continues_the_run_with_its_flags_and_its_history(tmp_path, stop, learner):
    """A run started with -f, --eval-freq, --eval-episodes and --env-kwargs is stopped by a real signal; the
    command it prints (the last line of its command.txt too) is run verbatim: it continues in the same log
    folder with the same evaluation settings, to the run's own end (-n is not repeated), exits 0, and its
    evaluations.npz holds the stopped run's history, then its own. Before: `python train.py --algo A --env E
    -i CHECKPOINT`, which continued in ./logs with --eval-freq 25000 and no evaluations.npz."""
    runs, algo = tmp_path / "my runs", learner[1]
    flags = ["-f", str(runs), "--eval-freq", "300", "--eval-episodes", "2", "--env-kwargs", "g:9.81"]
    log = tmp_path / "first.log"
    with log.open("w") as out:
        first_proc = subprocess.Popen(
            [sys.executable, "train.py", *learner, *flags, "-n", "900"],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_until(lambda: "Eval num_timesteps=300" in log.read_text() or first_proc.poll() is not None, "an eval")
        first_proc.send_signal(stop)
        assert first_proc.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-3000:]
    first = runs / algo / "Pendulum-v1_1"
    (checkpoint,) = first.glob("rl_model_*_steps.zip")
    (printed,) = [line for line in log.read_text().splitlines() if line.startswith("Resume with: ")]
    command = shlex.split(printed.removeprefix("Resume with: "))
    assert command[:2] == ["python", "train.py"] and command[-2:] == ["-i", str(checkpoint)], command
    assert command[command.index("-f") + 1] == str(runs) and "-n" not in command
    comment, written = (first / "Pendulum-v1" / "command.txt").read_text().splitlines()
    assert comment.startswith(f"# stopped by {stop.name} at ") and shlex.split(written) == command

    continued = subprocess.run(
        [sys.executable, *command[1:]], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )
    assert continued.returncode == 0, continued.stderr[-3000:]
    assert sorted(path.name for path in (runs / algo).iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]
    second = runs / algo / "Pendulum-v1_2"
    args = yaml.safe_load((second / "Pendulum-v1" / "args.yml").read_text())
    assert (args["log_folder"], args["eval_freq"], args["eval_episodes"]) == (str(runs), 300, 2)
    assert args["env_kwargs"] == {"g": 9.81} and args["trained_agent"] == str(checkpoint)
    assert read_checkpoint(second / "Pendulum-v1.zip").manifest.counters.env_steps == 900  # the run's own end
    old, new = np.load(first / "evaluations.npz"), np.load(second / "evaluations.npz")
    assert new["timesteps"].tolist() == [300, 600, 900]
    np.testing.assert_array_equal(new["results"][: len(old["results"])], old["results"])


def test_a_continuation_s_folder_holds_the_history_before_it_evaluates(tmp_path, capsys):
    """The carried history is written when the folder is made: a continuation that evaluates nothing (here
    --eval-freq -1) still has the whole evaluation history in its folder."""
    logs = tmp_path / "logs"
    argv = [*SAC_TINY, "-f", str(logs), "--eval-freq", "200", "--eval-episodes", "2", "--verbose", "0"]
    assert main([*argv, "-n", "400", "--save-freq", "300"]) == 0
    first = logs / "sac" / "Pendulum-v1_1"
    resumed = ["-i", str(first / "rl_model_300_steps.zip"), "--eval-freq", "-1", "--verbose", "0"]
    assert main([*SAC_TINY, "-f", str(logs), *resumed]) == 0
    old, new = (np.load(run / "evaluations.npz") for run in (first, logs / "sac" / "Pendulum-v1_2"))
    assert old["timesteps"].tolist() == [200, 400] and new["timesteps"].tolist() == [200]  # the history at 300
    np.testing.assert_array_equal(new["results"], old["results"][:1])


def test_minus_i_with_a_run_folder_resumes_its_newest_valid_checkpoint(tmp_path, capsys):
    """-i naming a run folder was "corrupt or incomplete checkpoint ... (a directory, not a checkpoint file)",
    exit 1: now the folder's newest valid rl_model_*_steps.zip is resumed, named in one line with the torn
    one it skipped; a folder without one is one line and exit 2, with nothing written."""
    logs = tmp_path / "logs"
    argv = [*SAC_TINY, "-f", str(logs), "--eval-freq", "-1", "--verbose", "0"]
    assert main([*argv, "-n", "400", "--save-freq", "200"]) == 0
    first = logs / "sac" / "Pendulum-v1_1"
    torn = first / "rl_model_600_steps.zip"  # cut short, as a copy killed midway leaves it
    torn.write_bytes((first / "rl_model_400_steps.zip").read_bytes()[:2000])
    capsys.readouterr()
    assert main([*argv, "-i", str(first), "-n", "100"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[0] == (  # then the note that the checkpoint holds no replay buffer
        f"-i {first}: resuming from its newest valid checkpoint rl_model_400_steps.zip "
        "(skipped, corrupt or incomplete: rl_model_600_steps.zip)"
    )
    manifest = read_checkpoint(logs / "sac" / "Pendulum-v1_2" / "Pendulum-v1.zip").manifest
    assert manifest.run.resumed_from == str(first / "rl_model_400_steps.zip") and manifest.counters.env_steps == 500

    no_checkpoint = logs / "sac" / "Pendulum-v1_2"  # a finished run's folder: its final model, no rl_model_*
    assert main([*argv, "-i", str(no_checkpoint)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"error: -i {no_checkpoint}: a folder with no rl_model_*_steps.zip checkpoint; name a checkpoint file "
        "(.zip), or a run folder holding one (written by --save-freq N, or by a run stopped with Ctrl-C or SIGTERM)"
    ]
    assert sorted(path.name for path in (logs / "sac").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]


def test_the_final_evaluation_keeps_a_resumed_run_bit_identical_to_an_uninterrupted_one(tmp_path):
    """A run of 500 steps evaluated every 300 gets its final model evaluated at 500; resumed from its
    checkpoint at 250, the continuation ends with the same parameters and the same evaluations, the final
    one included (it runs after training, on its own env and seeds: the training's streams are untouched)."""
    logs = tmp_path / "logs"
    evaluation = ["--eval-freq", "300", "--eval-episodes", "2", "--verbose", "0"]
    assert (
        main([*SAC_TINY, "-f", str(logs), *evaluation, "-n", "500", "--save-freq", "250", "--save-replay-buffer"]) == 0
    )
    first = logs / "sac" / "Pendulum-v1_1"
    assert main([*SAC_TINY, "-f", str(logs), *evaluation, "-i", str(first / "rl_model_250_steps.zip")]) == 0
    second = logs / "sac" / "Pendulum-v1_2"
    assert state_hash(first / "Pendulum-v1.zip") == state_hash(second / "Pendulum-v1.zip")
    original, continued = np.load(first / "evaluations.npz"), np.load(second / "evaluations.npz")
    assert original["timesteps"].tolist() == continued["timesteps"].tolist() == [300, 500]
    np.testing.assert_array_equal(original["results"], continued["results"])
