"""train.py: clear errors before anything is written (RELIABILITY A1-A6, A8, A10, A12, H1), run folder layout."""

import csv
import re
import shlex

import numpy as np
import pytest
import yaml

from rlbench.cli.train import main
from rlbench.config.algorithms.sac import build_config as build_sac_config
from rlbench.config.entry import normalize_entry, split_entry
from rlbench.envs.wrappers import trusted_modules
from tests.integration.test_tracking import isolated_env, train_process
from tests.run_files import wandb_run

TINY = ["--verbose", "0", "-params", "policy_kwargs:dict(net_arch=[16, 16])", "batch_size:32", "learning_starts:50"]


def run_cli(tmp_path, *argv):
    return main(["-f", str(tmp_path / "logs"), *argv])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--env", "Pendulm-v1"], r"not found.*did you mean.*Pendulum-v1"),
        (["--env", "gymnax:Pendulm-v1"], r"gymnax has no environment 'Pendulm-v1'; did you mean gymnax:Pendulum-v1"),
        (["--env", "gymnax:Catch-bsuite"], r"gymnax:Catch-bsuite': rlbench does not know this env's termin"),
        (["--algo", "sacc"], r"unknown algorithm 'sacc'.*did you mean 'sac'"),
        (["-params", "learning_rat:0.001"], r"unknown hyperparameter 'learning_rat'.*did you mean 'learning_rate'"),
        (["-params", "learning_rate:abc"], r"learning_rate"),
        (["-params", "batch_size:-4"], r"batch_size: -4 is out of range"),
        (["-params", "tau:1.5"], r"tau: 1.5 is out of range"),
        (["-params", "gamma:1.2"], r"gamma: 1.2 is out of range"),
        (["-params", "ent_coef:autox"], r"ent_coef: expected 'auto'"),
        (["-params", "learning_rate"], r"expected key:value"),
        (["-params", ":1"], r"expected key:value"),
        (["-params", "gamma:0.9", "gamma:0.8"], r"'gamma' given twice"),
        (["-params", "policy_kwargs:dict(net_arch=[64, 64], activation_fn=nn.Foo)"], r"activation_fn: unknown"),
        (["-params", "policy:CnnPolicy"], r"policy: 'CnnPolicy' is not supported; valid: MlpPolicy, SimbaPolicy"),
        (["-params", "normalize:dict(norm_obs=True, clip=5.0)"], r"normalize: unknown argument 'clip'"),
        (["-n", "0"], r"n_timesteps.*positive integer"),
        (["-n", "-5"], r"n_timesteps.*positive integer"),
        (["-params", "buffer_size:100000000000"], r"replay buffer needs .* GiB .* available"),
        (["-conf", "missing.yml"], r"hyperparameter file not found: missing.yml"),
        (["--algo", "td3", "-params", "ent_coef:auto"], r"error: ent_coef: a key of sac, droq, crossq, tqc, ppo, a2c;"),
        (["-params", "noise_type:'normal'"], r"error: noise_type: a key of td3, ddpg; --algo sac does not read it"),
        (["--algo", "ddpg", "-params", "noise_std:-1", "noise_type:'normal'"], r"error: noise_std: -1.0 is out of"),
        (["--algo", "td3", "-params", "noise_type:'pink'", "noise_std:0.1"], r"error: noise_type: expected one of"),
    ],
)
def test_bad_input_exits_2_before_writing(tmp_path, capsys, argv, message):
    """The error is the only line: nothing before it (issue 32 item 14: "Compilation cache: ..." was printed
    first, and the replay buffer's size before its own error)."""
    assert run_cli(tmp_path, "--algo", "sac", "--env", "Pendulum-v1", *argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and re.search(message, err), out + err
    assert not (tmp_path / "logs").exists()


def test_jax_env_kwargs_the_env_rejects_exit_2_before_writing(tmp_path, capsys):
    argv = ["--env", "gymnax:Pendulum-v1", "--env-kwargs", "max_tork:1.0"]
    assert run_cli(tmp_path, "--algo", "sac", *argv) == 2
    err = capsys.readouterr().err  # stdout names the hyperparameter entry used: sac.yml has no gymnax entry
    expected = "error: --env-kwargs / env_kwargs: gymnax:Pendulum-v1 has no parameter 'max_tork'; valid: max_steps_"
    assert err.startswith(expected) and len(err.splitlines()) == 1, err
    assert not (tmp_path / "logs").exists()


def test_a_discrete_jax_env_under_sac_exits_2_naming_the_algorithms_that_act_in_it(tmp_path, capsys):
    assert run_cli(tmp_path, "--algo", "sac", "--env", "gymnax:CartPole-v1") == 2
    err = capsys.readouterr().err  # stdout names the hyperparameter entry used: sac.yml has no gymnax entry
    assert err.startswith("error: --env gymnax:CartPole-v1 has a Discrete action space") and len(err.splitlines()) == 1
    assert err.rstrip().endswith("algorithms for Discrete actions: ppo, a2c, dqn, qrdqn"), err
    assert not (tmp_path / "logs").exists()


def test_code_in_params_is_refused_not_run(tmp_path, capsys):
    marker = tmp_path / "pwned"
    payload = f"policy_kwargs:__import__('os').system('touch {marker}')"
    assert run_cli(tmp_path, "-params", payload) == 2
    assert "not a literal" in capsys.readouterr().err
    assert not marker.exists()


def test_yaml_python_tags_and_missing_env_entry(tmp_path, capsys):
    tagged = tmp_path / "tagged.yml"
    tagged.write_text("Pendulum-v1: !!python/object/apply:os.system ['true']\n")
    assert run_cli(tmp_path, "-conf", str(tagged)) == 2
    err = capsys.readouterr().err
    assert "invalid YAML" in err and "tagged.yml" in err and "line 1" in err
    no_entry = tmp_path / "other.yml"
    no_entry.write_text("CartPole-v1:\n  n_timesteps: 10\n")
    assert run_cli(tmp_path, "-conf", str(no_entry)) == 2
    err = capsys.readouterr().err
    assert "no hyperparameters for Pendulum-v1" in err and "keys: CartPole-v1" in err


def test_run_folder_layout_and_saved_config_round_trip(tmp_path, capsys):
    argv = [
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-n",
        "300",
        "--eval-freq",
        "150",
        "--eval-episodes",
        "2",
        *TINY,
        "gamma:0.95",
        "learning_rate:lin_1e-3",
    ]
    assert run_cli(tmp_path, *argv) == 0
    run_dir = tmp_path / "logs" / "sac" / "Pendulum-v1_1"
    for name in (
        "Pendulum-v1/config.yml",
        "Pendulum-v1/args.yml",
        "Pendulum-v1/command.txt",
        "evaluations.npz",
        "progress.csv",
        "Pendulum-v1.zip",
        "best_model.zip",
    ):
        assert (run_dir / name).is_file(), name
    evaluations = np.load(run_dir / "evaluations.npz")
    np.testing.assert_array_equal(evaluations["timesteps"], [150, 300])
    assert evaluations["results"].shape == (2, 2) and evaluations["ep_lengths"].shape == (2, 2)
    config = yaml.safe_load((run_dir / "Pendulum-v1/config.yml").read_text())
    assert config["gamma"] == 0.95 and config["learning_rate"] == "lin_0.001" and config["n_timesteps"] == 300
    # config.yml is a valid hyperparameter entry that rebuilds the same learner config.
    _, _, learner_keys = split_entry(normalize_entry(config, "config.yml"), "config.yml", trusted_modules())
    rebuilt = build_sac_config(learner_keys, 1, "config.yml")
    assert rebuilt.gamma == 0.95 and rebuilt.actor.hidden == (16, 16) and rebuilt.batch_size == 32
    args = yaml.safe_load((run_dir / "Pendulum-v1/args.yml").read_text())
    assert args["seed"] >= 0 and args["env"] == "Pendulum-v1"
    command = (run_dir / "Pendulum-v1/command.txt").read_text()
    assert shlex.split(command)[:2] == ["python", "train.py"] and shlex.split(command)[4:] == argv
    # A second run gets the next folder id.
    assert run_cli(tmp_path, *argv) == 0
    assert (tmp_path / "logs" / "sac" / "Pendulum-v1_2" / "evaluations.npz").is_file()


def test_drawn_seed_is_printed_and_saved(tmp_path, capsys):
    assert (
        run_cli(
            tmp_path,
            "-n",
            "60",
            "--eval-freq",
            "-1",
            "-params",
            "learning_starts:1000",
            "policy_kwargs:dict(net_arch=[8])",
            "--verbose",
            "1",
        )
        == 0
    )
    out = capsys.readouterr().out
    seed = int(out.split("Seed: ")[1].split()[0])
    args = yaml.safe_load(next((tmp_path / "logs").rglob("args.yml")).read_text())
    assert args["seed"] == seed


def test_droq_preset_is_overridden_by_params(tmp_path):
    assert (
        run_cli(
            tmp_path,
            "--algo",
            "droq",
            "--env",
            "Pendulum-v1",
            "-n",
            "40",
            "--eval-freq",
            "-1",
            "-params",
            "learning_starts:1000",
            "policy_kwargs:dict(net_arch=[8])",
            "gradient_steps:2",
            "--verbose",
            "0",
        )
        == 0
    )
    config = yaml.safe_load(next((tmp_path / "logs").rglob("config.yml")).read_text())
    assert config["gradient_steps"] == 2 and config["policy_delay"] == 20  # file/-params win, preset fills
    assert config["policy_kwargs"]["dropout_rate"] == 0.01 and config["policy_kwargs"]["layer_norm"] is True


def test_pybullet_env_ids_work_without_connect_noise(tmp_path, capfd):
    assert (
        run_cli(
            tmp_path,
            "--env",
            "HalfCheetahBulletEnv-v0",
            "-n",
            "20",
            "--eval-freq",
            "10",
            "--eval-episodes",
            "1",
            "-params",
            "learning_starts:10",
            "batch_size:8",
            "buffer_size:1000",
            "policy_kwargs:dict(net_arch=[8])",
            "--verbose",
            "0",
        )
        == 0
    )
    # PyBullet's C code prints "argv[0]=" on every env's first connection (probe, training and eval envs).
    assert "argv[0]" not in capfd.readouterr().out
    run_dir = tmp_path / "logs" / "sac" / "HalfCheetahBulletEnv-v0_1"
    evaluations = np.load(run_dir / "evaluations.npz")
    np.testing.assert_array_equal(evaluations["timesteps"], [10, 20])
    assert evaluations["results"].shape == (2, 1) and np.isfinite(evaluations["results"]).all()
    assert yaml.safe_load((run_dir / "HalfCheetahBulletEnv-v0" / "config.yml").read_text())["buffer_size"] == 1000


def test_optimize_bad_input_is_the_only_line(tmp_path, capsys):
    """-optimize too: the compile cache's line comes after the checks, so a bad -params is the first line."""
    assert run_cli(tmp_path, "-optimize", "--n-trials", "1", "-params", "learning_rat:0.1") == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "learning_rat" in err, out + err
    assert not (tmp_path / "logs").exists()


def test_a_run_shorter_than_eval_freq_says_so_and_evaluates_its_final_model(tmp_path):
    """Issue 44 item 9: `-n 300` at the default --eval-freq 25000, with --track, evaluated nothing, wrote no
    evaluations.npz and no final_eval to W&B, and said nothing. Now a note at the start, and the final model
    evaluated at the end: evaluations.npz, a progress.csv row, W&B's history and summary (final_eval)."""
    argv = ["--algo", "sac", "--env", "Pendulum-v1", "-n", "300", "--eval-episodes", "2", "--seed", "3", "--track"]
    argv += ["-params", "policy_kwargs:dict(net_arch=[8])", "batch_size:8", "learning_starts:100"]
    proc = train_process(tmp_path, *argv, env=isolated_env(tmp_path, WANDB_MODE="offline"))
    assert (
        "Note: no evaluation falls due before this run ends at 300 env steps (--eval-freq 25000): its final model "
        "is evaluated at its end instead (2 episodes)\n"
    ) in proc.stdout
    run_dir = tmp_path / "logs" / "sac" / "Pendulum-v1_1"
    evaluations = np.load(run_dir / "evaluations.npz")
    assert evaluations["timesteps"].tolist() == [300] and evaluations["results"].shape == (1, 2)
    mean = float(evaluations["results"].mean())
    assert f"Final evaluation at 300 env steps: episode_reward={mean:.2f} +/- " in proc.stdout
    with (run_dir / "progress.csv").open() as file:
        last = list(csv.DictReader(file))[-1]
    assert last["time/total_timesteps"] == "300" and float(last["eval/mean_reward"]) == pytest.approx(mean)
    (wandb_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    run = wandb_run(wandb_dir)
    assert [(row["global_step"], row["eval/mean_reward"]) for row in run["history"] if "eval/mean_reward" in row] == [
        (300, pytest.approx(mean))
    ]
    assert run["summary"]["final_eval"] == {"env_steps": 300, "mean_return": pytest.approx(mean), "episodes": 2}
    assert run["summary"]["final_eval_mean_reward"] == pytest.approx(mean)


def test_a_run_with_evaluations_off_gets_no_final_evaluation(tmp_path, capsys):
    """--eval-freq -1 asks for no evaluation: none at the end either, and no note."""
    argv = ["-n", "200", "--eval-freq", "-1", "-params", "policy_kwargs:dict(net_arch=[8])", "learning_starts:100"]
    assert run_cli(tmp_path, *argv) == 0
    out = capsys.readouterr().out
    assert "Note: no evaluation" not in out and "Final evaluation" not in out
    assert not (tmp_path / "logs" / "sac" / "Pendulum-v1_1" / "evaluations.npz").exists()
