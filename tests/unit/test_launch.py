"""What launch records for a run (issue 32 item 14): a seed's command.txt trains that seed alone, args.yml
holds RL Zoo's dicts."""

import shlex
from pathlib import Path

from rlbench.run.outputs import seed_alone_command, zoo_args

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
