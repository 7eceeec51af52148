"""Hyperparameter parsing: RL Zoo spellings to typed configs, and literal parsing without eval."""

import pytest

from rlbench.algos.common.config import ReplayConfig
from rlbench.algos.common.schedules import ConstantSchedule, LinearSchedule
from rlbench.config import hyperparams
from rlbench.config.algorithms.crossq import build_config as build_crossq_config
from rlbench.config.algorithms.sac import build_config as build_sac_config
from rlbench.config.entry import normalize_entry, split_entry
from rlbench.config.hyperparams import merge
from rlbench.config.literals import LiteralError, parse_key_values, parse_value
from rlbench.config.registry import ALGORITHMS
from rlbench.envs.wrappers import trusted_modules
from rlbench.errors import ConfigError
from tests.conftest import off_policy_algorithms, value_based_algorithms


@pytest.mark.parametrize(
    "text,value",
    [
        ("0.01", 0.01),
        ("10", 10),
        ("True", True),
        ("None", None),
        ("-3", -3),
        ("1e6", 1e6),
        ("auto", "auto"),
        ("auto_0.1", "auto_0.1"),
        ("lin_7.3e-4", "lin_7.3e-4"),
        ("lin_1e-3", "lin_1e-3"),
        ("nn.ReLU", "nn.ReLU"),
        ("'quoted'", "quoted"),
        ("[1, 'step']", [1, "step"]),
        ("(1, 2)", (1, 2)),
        (
            "dict(net_arch=dict(pi=[64], qf=[400, 300]), activation_fn=nn.Tanh)",
            {"net_arch": {"pi": [64], "qf": [400, 300]}, "activation_fn": "nn.Tanh"},
        ),
    ],
)
def test_literals(text, value):
    assert parse_value(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "a + b",
        "open('x')",
        "[x for x in y]",
        "dict(**kwargs)",
        "lambda: 0",
        "().__class__",
    ],
)
def test_non_literals_are_refused(text):
    with pytest.raises(LiteralError, match="not a literal"):
        parse_value(text)


def test_key_values_split_on_first_colon():
    assert parse_key_values(["x:'a:b'"], "-params") == {"x": "a:b"}


def test_sac_spellings():
    cfg = build_sac_config(
        {
            "learning_rate": "lin_7.3e-4",
            "ent_coef": "auto_0.1",
            "gradient_steps": -1,
            "train_freq": [4, "step"],
            "target_entropy": -2,
            "policy_kwargs": {"net_arch": {"pi": [64], "qf": [400, 300]}, "activation_fn": "nn.Tanh", "n_critics": 3},
        },
        2,
        "test",
    )
    assert cfg.learning_rate == LinearSchedule(7.3e-4)
    assert cfg.ent_coef.initial == 0.1 and cfg.ent_coef.learned
    assert cfg.gradient_steps == 8 and cfg.train_freq == 4  # -1: as many as env steps per iteration
    assert cfg.actor.hidden == (64,) and cfg.critic.hidden == (400, 300) and cfg.actor.activation == "tanh"
    assert cfg.n_critics == 3 and cfg.target_entropy == -2.0
    fixed = build_sac_config({"ent_coef": 0.2, "learning_rate": 1e-3}, 1, "test")
    assert not fixed.ent_coef.learned and fixed.learning_rate == ConstantSchedule(1e-3)


@pytest.mark.parametrize("algo", ["sac", "droq", "tqc", "crossq"])
def test_temperature_loss_is_read_written_back_and_refused_by_name(algo):
    spec = ALGORITHMS[algo]
    assert spec.build_config(dict(spec.preset), 1, algo).temperature_loss == "log_alpha"  # SB3's, the default
    cfg = spec.build_config(merge(spec.preset, {"temperature_loss": "alpha"}), 1, algo)
    assert cfg.temperature_loss == "alpha" and spec.config_to_hyperparams(cfg)["temperature_loss"] == "alpha"
    for value in ("alpa", 1, None):
        expected = (
            "temperature_loss: expected log_alpha (SB3's, and SBX's since 0.18) or alpha (SBX's before 0.18), "
            f"got {value!r} (from test)"
        )
        with pytest.raises(ConfigError) as raised:
            spec.build_config({"temperature_loss": value}, 1, "test")
        assert str(raised.value) == expected


def test_saved_hyperparams_rebuild_the_same_config():
    for name in off_policy_algorithms():
        spec = ALGORITHMS[name]
        for precision in ("float32", "bfloat16"):
            cfg = spec.build_config(merge(spec.preset, {"learning_rate": "lin_1e-3", "precision": precision}), 1, name)
            assert cfg.actor.precision == cfg.critic.precision == precision
            assert spec.build_config(spec.config_to_hyperparams(cfg), 1, name) == cfg


@pytest.mark.parametrize("name", value_based_algorithms())
def test_saved_value_based_hyperparams_rebuild_the_same_config(name):
    spec = ALGORITHMS[name]
    entry = {
        "learning_rate": "lin_1e-3",
        "precision": "bfloat16",
        "exploration_fraction": 0.3,
        "max_grad_norm": 5.0,
        "train_freq": [2, "episode"],
        "gradient_steps": -1,
        "policy_kwargs": {"net_arch": [32], "activation_fn": "tanh"},
    }
    cfg = spec.build_config(entry, 1, name)
    assert cfg.q_network.precision == "bfloat16" and cfg.q_network.hidden == (32,)
    assert cfg.exploration_schedule.fraction == 0.3 and cfg.max_grad_norm == 5.0 and cfg.gradient_steps == -1
    assert spec.build_config(spec.config_to_hyperparams(cfg), 1, name) == cfg


@pytest.mark.parametrize(
    "params,message",
    [
        ({"train_freq": [1, "epoch"]}, r"train_freq: expected n, \[n, 'step'\] or \[n, 'episode'\]"),
        ({"policy_kwargs": {"net_arch": [0]}}, "positive integers"),
        ({"policy_kwargs": {"net_arch": {"pi": [8]}}}, "keys pi and qf"),
        ({"policy_kwargs": {"batch_norm": True}}, "use --algo crossq"),
        ({"learning_rate": "cos_1e-3"}, "lin_"),
        ({"policy_kwargs": "x"}, "expected a dict"),
        ({"precision": "float16"}, "precision: expected one of float32, bfloat16, got 'float16'"),
    ],
)
def test_sac_rejections(params, message):
    with pytest.raises(ConfigError, match=message):
        build_sac_config(params, 1, "test")


def test_crossq_refuses_tau_and_accepts_batch_norm_keys():
    with pytest.raises(ConfigError, match="no target network"):
        build_crossq_config({"tau": 0.01}, 1, "test")
    cfg = build_crossq_config(
        {
            "policy_kwargs": {
                "batch_norm": True,
                "batch_norm_actor": False,
                "renorm_warmup_steps": 10,
                "batch_norm_momentum": 0.9,
            }
        },
        1,
        "t",
    )
    assert cfg.critic.batch_norm and not cfg.actor.batch_norm and cfg.critic.renorm_warmup_steps == 10


def test_crossq_layer_norm_with_batch_norm_warns():
    with pytest.warns(UserWarning, match="normalises twice"):
        build_crossq_config({"policy_kwargs": {"batch_norm": True, "layer_norm": True}}, 1, "test")


@pytest.mark.parametrize("algo", off_policy_algorithms() + value_based_algorithms())  # PPO's: test_ppo_learner.py
def test_every_shipped_entry_builds_its_algorithms_config(algo):
    spec = ALGORITHMS[algo]
    table = hyperparams.read_file(hyperparams.default_file(algo))
    discrete = "Box" not in spec.action_spaces
    assert {"CartPole-v1", "Acrobot-v1"} <= set(table) if discrete else {"HalfCheetah-v4", "Pendulum-v1"} <= set(table)
    for env_id, entry in table.items():
        where = f"hyperparams/{algo}.yml {env_id}"
        _, _, learner_keys = split_entry(normalize_entry(entry, where), where, trusted_modules())
        assert isinstance(spec.build_config(merge(spec.preset, learner_keys), 1, where), ReplayConfig)


def test_droq_preset_below_file_and_params():
    spec = ALGORITHMS["droq"]
    cfg = spec.build_config(merge(spec.preset, {"policy_delay": 10}, {"policy_kwargs": {"net_arch": [64]}}), 1, "t")
    assert cfg.gradient_steps == 20 and cfg.policy_delay == 10 and cfg.learning_starts == 10_000
    assert cfg.critic.dropout_rate == 0.01 and cfg.critic.layer_norm and cfg.critic.hidden == (64,)


@pytest.mark.parametrize("algo", ["sac", "droq", "tqc"])
def test_target_update_interval_is_read_and_written_back(algo):
    spec = ALGORITHMS[algo]
    cfg = spec.build_config(merge(spec.preset, {"target_update_interval": 4, "tau": 0.02}), 1, algo)
    assert cfg.target_update_interval == 4 and cfg.tau == 0.02
    assert spec.config_to_hyperparams(cfg)["target_update_interval"] == 4
    assert spec.build_config(spec.config_to_hyperparams(cfg), 1, algo) == cfg
    assert spec.build_config(spec.preset, 1, algo).target_update_interval == 1  # SB3's default: every step
    for bad in (0, 2.5, "2", True):
        with pytest.raises(ConfigError, match="target_update_interval"):
            spec.build_config({"target_update_interval": bad}, 1, algo)


def test_crossq_refuses_target_update_interval_by_name():
    with pytest.raises(ConfigError, match="target_update_interval: CrossQ has no target network"):
        build_crossq_config({"target_update_interval": 2}, 1, "test")


def test_train_freq_in_episodes_is_read_and_written_back():
    cfg = build_sac_config({"train_freq": [2, "episode"], "gradient_steps": -1}, 1, "test")
    assert (cfg.train_freq, cfg.train_freq_unit, cfg.gradient_steps) == (2, "episode", -1)  # -1: counted per rollout
    written = ALGORITHMS["sac"].config_to_hyperparams(cfg)
    assert written["train_freq"] == [2, "episode"] and written["gradient_steps"] == -1
    assert build_sac_config(written, 1, "test") == cfg
    steps = build_sac_config({"train_freq": [4, "step"], "gradient_steps": -1}, 2, "test")
    assert (steps.train_freq_unit, steps.gradient_steps) == ("step", 8)
    assert ALGORITHMS["sac"].config_to_hyperparams(steps)["train_freq"] == 4
    with pytest.raises(ConfigError, match=r"train_freq: \[1, 'episode'\] counts episodes, which needs n_envs 1"):
        build_sac_config({"train_freq": [1, "episode"]}, 2, "test")


def test_env_file_name_flattens_modules_and_namespaces():
    """Issue 32 item 12: `phys2d/Pendulum-v0` is one folder name, as RL Zoo names it."""
    from rlbench.envs.make import env_file_name

    assert env_file_name("Pendulum-v1") == "Pendulum-v1"
    assert env_file_name("my_pkg.envs:MyEnv-v0") == "my_pkg.envs_MyEnv-v0"
    assert env_file_name("phys2d/Pendulum-v0") == "phys2d-Pendulum-v0"
