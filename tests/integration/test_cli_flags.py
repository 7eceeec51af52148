"""RL Zoo's flags: booleans, not-yet-supported features, device, env kwargs, wrappers, packages, files."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import yaml

from rlbench.cli.train import build_parser, main
from tests.conftest import REPO_ROOT

QUIET = ["--verbose", "0", "--eval-freq", "-1"]
TINY = ["-params", "learning_starts:1000", "policy_kwargs:dict(net_arch=[8])"]


def run_cli(tmp_path, *argv):
    return main(["-f", str(tmp_path / "logs"), *argv])


def saved(tmp_path, name):
    return yaml.safe_load(next((tmp_path / "logs").rglob(name)).read_text())


def run_files(run_dir, env_id="Pendulum-v1"):
    """(config.yml, args.yml, progress.csv rows) of one finished run: what a run that exits 0 must write."""
    params = run_dir / env_id.replace(":", "_")
    rows = (run_dir / "progress.csv").read_text().splitlines()
    assert rows[0].startswith("time/total_timesteps,") and (run_dir / f"{env_id.replace(':', '_')}.zip").is_file()
    return yaml.safe_load((params / "config.yml").read_text()), yaml.safe_load((params / "args.yml").read_text()), rows


@pytest.mark.parametrize(
    "argv,value",
    [([], False), (["--uuid"], True), (["--uuid", "false"], False), (["--uuid", "True"], True), (["--no-uuid"], False)],
)
def test_boolean_flags_are_real_booleans(argv, value):
    assert build_parser().parse_args(argv).uuid is value
    renamed = [a.replace("uuid", "save-replay-buffer") for a in argv]
    assert build_parser().parse_args(renamed).save_replay_buffer is value


def test_rl_zoo_prefix_abbreviations():
    args = build_parser().parse_args(["-param", "gamma:0.9", "-c", "x.yml", "-tags", "a", "b"])
    assert args.hyperparams == ["gamma:0.9"] and args.conf_file == "x.yml" and args.wandb_tags == ["a", "b"]


@pytest.mark.parametrize("argv,name", [(["--truncate-last-trajectory", "false"], "--truncate-last-trajectory")])
def test_later_features_exit_2_not_supported_yet(tmp_path, capsys, argv, name):
    assert run_cli(tmp_path, *argv) == 2
    err = capsys.readouterr().err
    assert name in err and "not supported yet" in err
    assert not (tmp_path / "logs").exists()


def test_false_booleans_of_later_features_are_accepted(tmp_path):
    assert run_cli(tmp_path, "-n", "20", *QUIET, "--track", "false", "--save-replay-buffer", "false", *TINY) == 0
    _, args, _ = run_files(tmp_path / "logs" / "sac" / "Pendulum-v1_1")
    assert args["track"] is False and args["save_replay_buffer"] is False
    assert not list((tmp_path / "logs").rglob("wandb"))


def test_device_gpu_without_gpu_exits_2_listing_devices(tmp_path, capsys):
    import jax

    if jax.default_backend() != "cpu":
        pytest.skip("a GPU is present")
    assert run_cli(tmp_path, "-n", "20", *QUIET, "--device", "gpu", *TINY) == 2
    assert re.search(r"no GPU found \(devices: .*cpu", capsys.readouterr().err)


def test_num_threads_other_than_1_is_refused(tmp_path, capsys):
    assert run_cli(tmp_path, "-n", "20", *QUIET, "--num-threads", "4") == 2
    assert "--num-threads" in capsys.readouterr().err


def test_n_seeds_below_1_exits_2_before_any_folder(tmp_path, capsys):
    assert run_cli(tmp_path, "-n", "20", *QUIET, "--n-seeds", "0", *TINY) == 2
    assert capsys.readouterr().err == "error: --n-seeds: expected a positive integer, got 0\n"
    assert not (tmp_path / "logs").exists()


def test_uuid_run_folders(tmp_path):
    assert run_cli(tmp_path, "-n", "20", *QUIET, "-uuid", *TINY) == 0
    (run_dir,) = (tmp_path / "logs" / "sac").iterdir()
    assert re.fullmatch(r"Pendulum-v1_1_[0-9a-f-]{36}", run_dir.name)


def test_concurrent_runs_never_share_a_folder(tmp_path):
    command = [sys.executable, "train.py", "-f", str(tmp_path / "logs"), "-n", "20", *QUIET, *TINY]
    procs = [subprocess.Popen(command, cwd=REPO_ROOT) for _ in range(3)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    names = sorted(p.name for p in (tmp_path / "logs" / "sac").iterdir())
    assert names == ["Pendulum-v1_1", "Pendulum-v1_2", "Pendulum-v1_3"]


def test_env_kwargs_and_eval_env_kwargs(tmp_path):
    # tests.envs:Counting-v0 pays `reward` per step for 7 steps: eval returns show which kwargs it got.
    assert (
        run_cli(
            tmp_path,
            "--env",
            "tests.envs:Counting-v0",
            "-n",
            "14",
            "--verbose",
            "0",
            "--eval-freq",
            "14",
            "--eval-episodes",
            "2",
            "--env-kwargs",
            "reward:1.0",
            "--eval-env-kwargs",
            "reward:2.0",
            *TINY,
        )
        == 0
    )
    results = np.load(next((tmp_path / "logs").rglob("evaluations.npz")))["results"]
    np.testing.assert_array_equal(results, [[14.0, 14.0]])
    assert saved(tmp_path, "config.yml")["env_kwargs"] == {"reward": 1.0}


def test_file_env_kwargs_reach_the_eval_env(tmp_path):
    conf = tmp_path / "conf.yml"
    conf.write_text("default:\n  n_timesteps: 14\n  env_kwargs: {reward: 3.0}\n  learning_starts: 1000\n")
    assert (
        run_cli(
            tmp_path,
            "--env",
            "tests.envs:Counting-v0",
            "-c",
            str(conf),
            "--verbose",
            "0",
            "--eval-freq",
            "14",
            "--eval-episodes",
            "1",
        )
        == 0
    )
    np.testing.assert_array_equal(np.load(next((tmp_path / "logs").rglob("evaluations.npz")))["results"], [[21.0]])


def test_env_wrapper_from_params(tmp_path):
    wrapper = "env_wrapper:[{'gymnasium.wrappers.TimeLimit': dict(max_episode_steps=20)}]"
    assert (
        run_cli(tmp_path, "-n", "40", "--verbose", "0", "--eval-freq", "40", "--eval-episodes", "1", *TINY, wrapper)
        == 0
    )
    evaluations = np.load(next((tmp_path / "logs").rglob("evaluations.npz")))
    np.testing.assert_array_equal(evaluations["ep_lengths"], [[20]])
    assert saved(tmp_path, "config.yml")["env_wrapper"] == [{"gymnasium.wrappers.TimeLimit": {"max_episode_steps": 20}}]


def test_unknown_env_wrapper_exits_2(tmp_path, capsys):
    assert run_cli(tmp_path, "-n", "40", *QUIET, "-params", "env_wrapper:gymnasium.wrappers.NoSuchWrapper") == 2
    assert "cannot import 'gymnasium.wrappers.NoSuchWrapper'" in capsys.readouterr().err


def test_gym_packages_register_custom_envs(tmp_path):
    # Counting-v0 is registered by importing tests.envs, here and in each subprocess worker.
    assert (
        run_cli(
            tmp_path,
            "--gym-packages",
            "tests.envs",
            "--env",
            "Counting-v0",
            "-n",
            "14",
            *QUIET,
            *TINY,
            "--vec-env",
            "subproc",
        )
        == 0
    )
    _, args, _ = run_files(tmp_path / "logs" / "sac" / "Counting-v0_1", "Counting-v0")
    assert args["gym_packages"] == ["tests.envs"] and args["vec_env"] == "subproc"
    # Counting-v0 episodes last 7 steps: the 14 steps end two, as the Monitor file records them.
    assert (tmp_path / "logs" / "sac" / "Counting-v0_1" / "0.monitor.csv").read_text().splitlines()[2:] != []


def test_yaml_anchors_and_python_config(tmp_path):
    assert run_cli(tmp_path, "-conf", f"{REPO_ROOT}/tests/data/anchors.yml", *QUIET) == 0
    config = saved(tmp_path, "config.yml")
    assert config["gamma"] == 0.95 and config["n_timesteps"] == 40
    assert run_cli(tmp_path / "py", "-c", f"{REPO_ROOT}/tests/data/python_config.py", *QUIET) == 0
    config = yaml.safe_load(next((tmp_path / "py" / "logs").rglob("config.yml")).read_text())
    assert config["gamma"] == 0.9 and config["policy_kwargs"]["activation_fn"] == "tanh"


def test_module_path_config(tmp_path):
    # A module path: tests/data/python_config.py imported as tests.data.python_config.
    assert run_cli(tmp_path, "-conf", "tests.data.python_config", *QUIET) == 0
    assert saved(tmp_path, "config.yml")["gamma"] == 0.9


def test_issue_command_lines_parse_and_run(tmp_path):
    runs = tmp_path / "logs"
    assert (
        run_cli(
            tmp_path,
            "-n",
            "20",
            *QUIET,
            "-params",
            "learning_rate:'lin_7.3e-4'",
            "ent_coef:auto_0.1",
            "train_freq:4",
            "gradient_steps:4",
            "learning_starts:1000",
        )
        == 0
    )
    config, _, _ = run_files(runs / "sac" / "Pendulum-v1_1")
    assert (config["learning_rate"], config["ent_coef"], config["train_freq"], config["gradient_steps"]) == (
        "lin_0.00073",
        "auto_0.1",
        4,
        4,
    )
    policy = "policy_kwargs:dict(net_arch=dict(pi=[16,16],qf=[16,16]), dropout_rate=0.01, batch_norm_actor=False)"
    assert run_cli(tmp_path, "--algo", "crossq", "-n", "20", *QUIET, "-params", "learning_starts:10", policy) == 0
    config, _, _ = run_files(runs / "crossq" / "Pendulum-v1_1")
    assert config["policy_kwargs"]["dropout_rate"] == 0.01 and config["policy_kwargs"]["batch_norm_actor"] is False
    assert config["policy_kwargs"]["net_arch"] == {"pi": [16, 16], "qf": [16, 16]}
    assert (
        run_cli(
            tmp_path,
            "-n",
            "8",
            *QUIET,
            "-param",
            "n_envs:4",
            "gradient_steps:-1",
            "learning_starts:4",
            "policy_kwargs:dict(net_arch=[8])",
            "--vec-env",
            "subproc",
        )
        == 0
    )
    config, args, _ = run_files(runs / "sac" / "Pendulum-v1_2")
    assert config["n_envs"] == 4 and config["gradient_steps"] == 4 and args["vec_env"] == "subproc"  # -1: per env step
    assert run_cli(tmp_path, "-n", "20", *QUIET, *TINY, "--env-kwargs", "g:8.0", "--eval-env-kwargs", "g:5.0") == 0
    config, args, _ = run_files(runs / "sac" / "Pendulum-v1_3")
    assert config["env_kwargs"] == {"g": 8.0} and args["eval_env_kwargs"] == {"g": 5.0}


def test_config_errors_come_before_any_env_is_built(tmp_path, capsys, monkeypatch):
    import gymnasium

    def no_env(*args, **kwargs):
        raise AssertionError("an env was built before the configuration was checked")

    monkeypatch.setattr(gymnasium, "make", no_env)
    assert run_cli(tmp_path, "-n", "20", "-params", "learning_rat:0.001") == 2
    assert "did you mean 'learning_rate'" in capsys.readouterr().err


def test_a_flag_named_in_the_negative_gets_the_positive_as_its_opposite(capsys):
    """Issue 32 item 14: add_bool_flag generated `--no-no-optim-plots`; the opposite of `--no-optim-plots`
    is `--optim-plots`."""
    parser = build_parser()
    assert parser.parse_args(["--no-optim-plots"]).no_optim_plots is True
    assert parser.parse_args(["--optim-plots"]).no_optim_plots is False
    assert parser.parse_args(["--no-uuid"]).uuid is False
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--no-no-optim-plots"])
    assert exit_info.value.code == 2 and "unrecognized arguments: --no-no-optim-plots" in capsys.readouterr().err


@pytest.mark.parametrize("device", ["cuda:x", "gpu:", "cpu:0", "tpu:1"])
def test_device_spellings_other_than_gpu_n_exit_2_in_every_front_end(capsys, device):
    """train.py, enjoy.py, the sweep and `bench returns` share one --device (issue 32 item 14: they had drifted)."""
    from rlbench.bench.returns import build_parser as returns_parser
    from rlbench.cli.enjoy import build_parser as enjoy_parser
    from rlbench.sweep.command import build_parser as sweep_parser

    for parser in (build_parser(), enjoy_parser(), sweep_parser(), returns_parser()):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(["--device", device])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err == (  # one line, no usage before it (issue 44 item 8)
            f"{parser.prog}: error: argument --device: expected auto, cpu, gpu, cuda, gpu:N or cuda:N, got "
            f"{device!r}; see --help\n"
        )
        assert parser.parse_args(["--device", "cuda:1"]).device == "cuda:1"


def test_device_gpu_n_without_gpu_exits_2_naming_the_devices_found(tmp_path, capsys):
    """Issue 32 item 14: `--device cuda:1` was refused by argparse; gpu:N / cuda:N now pick the N-th GPU. On a
    CPU-only machine it is the missing-GPU error, listing the devices found, before anything is written."""
    import jax

    if jax.default_backend() != "cpu":
        pytest.skip("a GPU is present")
    assert run_cli(tmp_path, "-n", "20", *QUIET, "--device", "cuda:1", *TINY) == 2
    out, err = capsys.readouterr()
    assert out == "" and re.fullmatch(r"error: --device cuda:1: no GPU found \(devices: .*cpu.*\n", err)
    assert not (tmp_path / "logs").exists()


def test_n_at_or_below_learning_starts_warns_in_one_line(tmp_path, capsys):
    """Issue 32 item 14: `-n` at or below learning_starts took no gradient step without a word; it now warns
    (one line, on stderr) and trains as asked."""
    assert run_cli(tmp_path, "-n", "20", *QUIET, *TINY) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Warning:")]
    assert warnings == [
        "Warning: n_timesteps 20 <= learning_starts 1000: this run takes random actions only and no gradient "
        "step; raise -n or lower learning_starts (-params)"
    ]
    assert (
        run_cli(tmp_path, "-n", "20", *QUIET, "-params", "learning_starts:10", "policy_kwargs:dict(net_arch=[8])") == 0
    )
    assert "Warning" not in capsys.readouterr().err


def test_device_is_one_flag_in_every_command():
    """--device is defined once (rlbench.cli.flags): every command takes gpu:N / cuda:N and refuses the rest."""
    from rlbench.bench.returns import build_parser as returns_parser
    from rlbench.bench.speed import build_parser as speed_parser
    from rlbench.cli.enjoy import build_parser as enjoy_parser
    from rlbench.sweep.command import build_parser as sweep_parser

    parsers = (build_parser(), enjoy_parser(), enjoy_parser(True), sweep_parser(), returns_parser(), speed_parser())
    for parser in parsers:
        assert parser.parse_args(["--device", "cuda:1"]).device == "cuda:1"
        with pytest.raises(SystemExit):
            parser.parse_args(["--device", "tpu"])


def test_temperature_loss_from_params_lands_in_config_yml_and_a_bad_value_exits_2(tmp_path, capsys):
    """Issue 35 item 3: `-params temperature_loss:alpha` is the run's setting (config.yml, which a resume
    reads back); an unknown value is one line naming the key and the valid values, exit 2, nothing written."""
    argv = ["--algo", "tqc", "--env", "Pendulum-v1", "-n", "20", *QUIET, *TINY]
    assert run_cli(tmp_path, *argv, "temperature_loss:alpha") == 0
    config, _, _ = run_files(tmp_path / "logs" / "tqc" / "Pendulum-v1_1")
    assert config["temperature_loss"] == "alpha"
    capsys.readouterr()
    assert run_cli(tmp_path, *argv, "temperature_loss:alpa") == 2
    assert capsys.readouterr().err == (
        "error: temperature_loss: expected log_alpha (SB3's, and SBX's since 0.18) or alpha (SBX's before 0.18), "
        "got 'alpa' (from -params)\n"
    )
    assert sorted(path.name for path in (tmp_path / "logs" / "tqc").iterdir()) == ["Pendulum-v1_1"]


def test_a_bad_key_names_only_the_layer_that_has_it(tmp_path, capsys):
    """Issue 44 item 9: a key only -params has is "in -params", not "in .../sac.yml / -params"; one only the
    file has names the file alone, -params beside it or not. Exit 2, no folder."""
    conf = tmp_path / "mine.yml"
    conf.write_text("Pendulum-v1:\n  n_timesteps: 1000\n  learning_rat: 0.001\n")
    valid = "(valid: batch_size, buffer_size, ent_coef, gamma, gradient_steps, learning_rate, learning_starts,"
    cases = [
        (["-params", "learning_rat:0.001"], "in -params"),
        (["-conf", str(conf)], f"in {conf}"),
        (["-conf", str(conf), "-params", "gamma:0.9"], f"in {conf}"),
        (["-params", "gamma:0.9", "normalize:dict(norm_obs=True, bogus=1)"], None),
    ]
    for argv, where in cases:
        assert run_cli(tmp_path, "-n", "20", *QUIET, *argv) == 2
        err = capsys.readouterr().err
        if where is None:
            assert err.startswith("error: normalize: unknown argument 'bogus' (from -params) (valid: norm_obs,"), err
        else:
            assert err.startswith(
                f"error: unknown hyperparameter 'learning_rat' {where}; did you mean 'learning_rate'? {valid}"
            )
        assert err.count("\n") == 1 and "hyperparams/sac.yml" not in err
    assert not (tmp_path / "logs").exists()


def test_an_argparse_error_is_one_line_and_exit_2_in_every_command(tmp_path):
    """Issue 44 item 8: `train.py --device cuda:-1` printed 30 lines of usage before the error. Each command
    line, run for real: the error alone, `<prog>: error: ...; see --help`, exit 2, nothing written."""
    commands = [
        ([f"{REPO_ROOT}/train.py", "--device", "cuda:-1"], "train.py: error: argument --device: expected auto, cpu,"),
        ([f"{REPO_ROOT}/enjoy.py", "--bogus"], "enjoy.py: error: unrecognized arguments: --bogus"),
        (["-m", "rlbench.sweep", "--seeds", "2", "--seed-list", "1"], "python -m rlbench.sweep: error: argument"),
        (["-m", "rlbench.bench", "speed", "--bogus"], "python -m rlbench.bench speed: error: unrecognized arguments"),
        (["-m", "rlbench.report.plots"], "python -m rlbench.report.plots: error: the following arguments are required"),
    ]
    for argv, start in commands:
        done = subprocess.run(
            [sys.executable, *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu"},
        )
        assert done.returncode == 2 and done.stdout == "", done
        assert done.stderr.startswith(start) and done.stderr.endswith("; see --help\n"), done.stderr
        assert done.stderr.count("\n") == 1 and "usage:" not in done.stderr
    assert list(tmp_path.iterdir()) == []
