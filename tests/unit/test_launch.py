"""What launch records for a run (issue 32 item 14): a seed's command.txt trains that seed alone, args.yml
holds RL Zoo's dicts; what launch returns, in process or with run folders (issue 33 item 3)."""

import dataclasses
import shlex
from pathlib import Path

import jax
import numpy as np

from rlbench.run.experiment import RunRequest, resolve
from rlbench.run.launch import launch
from rlbench.run.outputs import RunOutputs, record_stop, resume_command, seed_alone_command, zoo_args

GROUP = "python train.py --algo sac --seed 5 --n-seeds 3 -params gamma:0.9 'policy_kwargs:dict(net_arch=[8])'"


def test_a_seed_of_a_group_is_retrained_alone_whatever_the_spelling_of_the_group_flags():
    alone = shlex.split(seed_alone_command(GROUP, 6))
    assert alone == [
        *["python", "train.py", "--algo", "sac", "-params", "gamma:0.9", "policy_kwargs:dict(net_arch=[8])"],
        *["--seed", "6", "--n-seeds", "1"],
    ]
    equals = shlex.split(seed_alone_command("python train.py --seed=5 --n-seeds=3 -n 100", 7))
    assert equals == ["python", "train.py", "-n", "100", "--seed", "7", "--n-seeds", "1"]
    # An abbreviation is left in place; the appended flags come last, and argparse keeps the last value.
    assert seed_alone_command("python train.py --n-see 3", 7).endswith("--n-see 3 --seed 7 --n-seeds 1")


def test_a_seed_of_a_resumed_group_resumes_its_own_checkpoint_alone():
    command = "python train.py --algo sac -i logs/sac/P_1/rl_model_100_steps.zip --eval-freq 50"
    alone = shlex.split(seed_alone_command(command, 2, Path("logs/sac/P_2/rl_model_100_steps.zip")))
    assert alone == [
        *["python", "train.py", "--algo", "sac", "--eval-freq", "50"],
        *["-i", "logs/sac/P_2/rl_model_100_steps.zip", "--n-seeds", "1"],
    ]
    assert seed_alone_command("", 1) == ""  # a caller that records no command


def test_args_yml_records_key_value_flags_as_rl_zoo_does():
    saved = {"hyperparams": ["gamma:0.9", "policy_kwargs:dict(net_arch=[8])"], "env_kwargs": [], "seed": 1}
    saved["eval_env_kwargs"] = None
    assert zoo_args(saved) == {
        "hyperparams": {"gamma": 0.9, "policy_kwargs": {"net_arch": [8]}},
        "env_kwargs": None,
        "eval_env_kwargs": None,
        "seed": 1,
    }


def tiny_request(tmp_path: Path) -> RunRequest:
    params = ("learning_starts:200", "batch_size:16", "buffer_size:1000", "policy_kwargs:dict(net_arch=[8])")
    return RunRequest(
        n_timesteps=300, seed=3, eval_freq=-1, verbose=0, params=params, log_folder=str(tmp_path / "logs")
    )


def test_an_in_process_launch_trains_what_a_launch_with_run_folders_trains(tmp_path):
    """-optimize trials and bench speed rows launch without run folders (RunOutputs.run_folders=False): the
    same learner, bit for bit, as train.py's launch of the same request, and nothing written."""
    with_folders = launch(resolve(tiny_request(tmp_path)), RunOutputs(log_folder=str(tmp_path / "logs"), verbose=0))
    in_process = launch(resolve(tiny_request(tmp_path)), RunOutputs(run_folders=False))
    assert with_folders.error is None and in_process.error is None
    assert with_folders.codes == in_process.codes == [0]
    assert [path.name for path in with_folders.run_dirs] == ["Pendulum-v1_1"] and in_process.run_dirs == []
    assert sorted(path.name for path in (tmp_path / "logs" / "sac").iterdir()) == ["Pendulum-v1_1"]
    pairs = zip(leaves(with_folders.result.state), leaves(in_process.result.state), strict=True)
    assert all(np.array_equal(a, b) for a, b in pairs)


def leaves(state):
    """The state's arrays, PRNG keys as their data (typed keys do not compare as arrays)."""
    as_data = lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x  # noqa: E731
    return [as_data(x) for x in jax.tree.leaves(state)]


def test_launch_returns_what_stopped_the_run_and_its_code(tmp_path):
    """A failure at the start (the log folder became a file) is returned, not raised: the front end decides."""
    exp = resolve(tiny_request(tmp_path))
    (tmp_path / "logs").write_text("")
    launched = launch(exp, RunOutputs(log_folder=str(tmp_path / "logs"), verbose=0))
    assert isinstance(launched.error, OSError) and launched.codes == [1] and launched.result is None


def test_the_continuation_repeats_every_flag_that_shaped_the_run_but_i_and_n():
    """Issue 44 item 9: the resume command carries the run's flags, whatever their spelling (abbreviated,
    --flag=value, a negative number, a value with spaces), read back from the parsed flags; not -i (the new
    checkpoint is appended), not -n (on resume it adds steps), not --seed (the checkpoint's), not the tuning
    flags."""
    from rlbench.cli.train import build_parser, continuation_flags

    argv = ["--env=Pendulum-v1", "--log-f", "my runs", "--eval-freq", "-1", "--eval-ep", "2", "-n", "2000"]
    argv += ["-i", "old.zip", "--track", "--wandb-project-name", "p", "-params", "gamma:0.9"]
    argv += ["policy_kwargs:dict(net_arch=[8, 8])", "--env-kwargs", "g:9.81", "--save-replay-buffer", "-P"]
    argv += ["--seed", "3", "--n-seeds", "2", "--device", "cpu", "--no-uuid", "--storage", "s.log", "--trial-id", "4"]
    parser = build_parser()
    given = parser.parse_args(argv)
    flags = continuation_flags(given)
    assert flags[:4] == ["--algo", "sac", "--env", "Pendulum-v1"]
    again = parser.parse_args(shlex.split(shlex.join([*flags, "-i", "new.zip"])))
    changed = {key for key, value in vars(given).items() if vars(again)[key] != value}
    assert changed == {"trained_agent", "n_timesteps", "seed", "storage", "trial_id"}
    assert again.trained_agent == "new.zip" and again.n_timesteps == again.seed == -1
    assert again.storage is None and again.trial_id is None


def test_a_stop_writes_the_resume_command_into_each_seed_s_command_txt(tmp_path):
    """After a stop, command.txt continues its run (a seed of a group: that seed alone, as its command.txt
    trains it) under a comment with the command that started the folder."""
    exp = resolve(dataclasses.replace(tiny_request(tmp_path), n_seeds=2))
    run_dirs = [tmp_path / f"Pendulum-v1_{n}" for n in (1, 2)]
    for run_dir in run_dirs:
        (run_dir / "Pendulum-v1").mkdir(parents=True)
    started = "python train.py -n 300 --seed 3 --n-seeds 2 -f 'my runs'"
    continuation = ("python", "train.py", "--algo", "sac", "--env", "Pendulum-v1", "-f", "my runs", "--n-seeds", "2")
    outputs = RunOutputs(command=started, continuation=continuation)
    checkpoints = [run_dir / "rl_model_100_steps.zip" for run_dir in run_dirs]
    record_stop(exp, outputs, run_dirs, checkpoints, "stopped by SIGTERM at 100 env steps")
    comment, command = (run_dirs[1] / "Pendulum-v1" / "command.txt").read_text().splitlines()
    assert comment == (
        "# stopped by SIGTERM at 100 env steps; started with: python train.py -n 300 -f 'my runs' --seed 4 --n-seeds 1"
    )
    assert shlex.split(command) == [*continuation[:-2], "-i", str(checkpoints[1]), "--n-seeds", "1"]
    assert resume_command(exp, outputs, checkpoints[0]) == shlex.join([*continuation, "-i", str(checkpoints[0])])
    record_stop(exp, RunOutputs(command="x"), run_dirs, checkpoints, "stopped")  # a sweep: it continues its cells
    assert (run_dirs[1] / "Pendulum-v1" / "command.txt").read_text().startswith("# stopped by SIGTERM")
