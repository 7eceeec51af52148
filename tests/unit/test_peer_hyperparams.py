"""rlbench's resolved entries in RL Zoo's format for SBX (rlbench.bench.peer_hyperparams), by hand values: every
setting written out as SBX's constructor and policy read it, and each setting SBX cannot express refused by name."""

import pytest

from rlbench.bench.peer_hyperparams import Untranslatable, peer_entry
from rlbench.config.entry import normalize_to_entry, parse_normalize
from rlbench.config.hyperparams import merge
from rlbench.config.registry import ALGORITHMS


def resolved(algo, entry, n_envs=1, **run):
    """The entry as rlbench resolves it (Experiment.hyperparams: run keys, then the learner's config written
    back in the file format), without building an env."""
    spec = ALGORITHMS[algo]
    config = spec.build_config(merge(spec.preset, entry), n_envs, "test")
    base = {"n_timesteps": 50_000, "n_envs": n_envs, "policy": "MlpPolicy", "env_kwargs": {}, "stats_window_size": 100}
    return {**base, **run, **spec.config_to_hyperparams(config)}


ADAM = {"b1": 0.9}


def test_sac_entry_by_hand():
    entry = {
        "learning_rate": 7.3e-4,
        "buffer_size": 300_000,
        "batch_size": 256,
        "gamma": 0.98,
        "tau": 0.02,
        "train_freq": 8,
        "gradient_steps": 8,
        "learning_starts": 1000,
        "ent_coef": "auto",
        "policy_kwargs": {"net_arch": [400, 300]},
        "use_sde": False,
    }
    normalize = normalize_to_entry(parse_normalize(True, 0.98, "test"))
    algo, zoo = peer_entry("sac", resolved("sac", entry, n_envs=2, normalize=normalize))
    assert algo == "sac"
    assert zoo == {
        "batch_size": 256,
        "buffer_size": 300_000,
        "ent_coef": "auto",
        "gamma": 0.98,
        "gradient_steps": 8,
        "learning_rate": 7.3e-4,
        "learning_starts": 1000,
        "n_envs": 2,
        "n_timesteps": 50_000,
        "normalize": {
            "norm_obs": True,
            "norm_reward": True,
            "clip_obs": 10.0,
            "clip_reward": 10.0,
            "gamma": 0.98,
            "epsilon": 1e-8,
        },
        "policy": "MlpPolicy",
        "policy_delay": 1,
        "policy_kwargs": {
            "dropout_rate": 0.0,
            "layer_norm": False,
            "n_critics": 2,
            "net_arch": {"pi": [400, 300], "qf": [400, 300]},
            "optimizer_kwargs": ADAM,
        },
        "stats_window_size": 100,
        "target_entropy": "auto",
        "tau": 0.02,
        "train_freq": 8,
        "use_sde": False,
    }


def test_spellings_that_differ():
    # a learned coefficient from 0.1 and a fixed one; a critic learning rate; a train_freq in episodes; env kwargs
    _, zoo = peer_entry(
        "sac", resolved("sac", {"ent_coef": "auto_0.1", "qf_learning_rate": 1e-3, "train_freq": [2, "episode"]})
    )
    assert (zoo["ent_coef"], zoo["qf_learning_rate"], zoo["train_freq"]) == ("auto_0.1", 1e-3, [2, "episode"])
    _, zoo = peer_entry("sac", resolved("sac", {"ent_coef": 0.2}, env_kwargs={"g": 9.81}))
    assert (zoo["ent_coef"], zoo["env_kwargs"]) == (0.2, {"g": 9.81}) and "qf_learning_rate" not in zoo
    assert "env_kwargs" not in peer_entry("sac", resolved("sac", {}))[1]  # none: RL Zoo's default


def test_droq_is_sbx_sac_with_a_dropout_and_layer_norm_critic():
    algo, zoo = peer_entry("droq", resolved("droq", {}))
    assert algo == "sac"
    assert (zoo["gradient_steps"], zoo["policy_delay"], zoo["learning_starts"]) == (20, 20, 10_000)
    assert zoo["policy_kwargs"] == {
        "dropout_rate": 0.01,
        "layer_norm": True,
        "n_critics": 2,
        "net_arch": {"pi": [256, 256], "qf": [256, 256]},
        "optimizer_kwargs": ADAM,
    }


def test_tqc_quantiles():
    entry = {"top_quantiles_to_drop_per_net": 5, "policy_kwargs": {"n_quantiles": 35, "n_critics": 3}}
    algo, zoo = peer_entry("tqc", resolved("tqc", entry))
    assert algo == "tqc" and zoo["top_quantiles_to_drop_per_net"] == 5 and zoo["tau"] == 0.005
    assert (zoo["policy_kwargs"]["n_quantiles"], zoo["policy_kwargs"]["n_critics"]) == (35, 3)


def test_crossq_batch_norm_and_no_target():
    algo, zoo = peer_entry("crossq", resolved("crossq", {"policy_kwargs": {"renorm_warmup_steps": 5000}}))
    assert algo == "crossq" and "tau" not in zoo
    assert (zoo["learning_rate"], zoo["policy_delay"]) == (1e-3, 3)
    assert zoo["policy_kwargs"] == {
        "batch_norm": True,
        "batch_norm_actor": True,
        "batch_norm_momentum": 0.99,
        "dropout_rate": 0.0,
        "layer_norm": False,
        "n_critics": 2,
        "net_arch": {"pi": [256, 256], "qf": [1024, 1024]},
        "optimizer_kwargs": {"b1": 0.5},
        "renorm_warmup_steps": 5000,
    }


def test_settings_the_peer_cannot_express_are_refused_by_name():
    entry = {
        "precision": "bfloat16",
        "target_update_interval": 2,
        "use_sde": True,
        "policy_kwargs": {"activation_fn": "nn.Tanh"},
    }
    with pytest.raises(Untranslatable) as refused:
        peer_entry("sac", resolved("sac", entry))
    names = [setting.split(" (")[0] for setting in refused.value.settings]
    assert names == [
        "policy_kwargs.activation_fn='tanh'",
        "precision='bfloat16'",
        "target_update_interval=2",
        "use_sde=True",
    ]
    assert "SBX cannot express" in str(refused.value) and "SBX trains in float32" in str(refused.value)


@pytest.mark.parametrize(
    ("algo", "resolved_entry", "named"),
    [
        ("crossq", resolved("crossq", {"policy_kwargs": {"n_quantiles": 25}}), "policy_kwargs.n_quantiles=25"),
        ("sac", {**resolved("sac", {}), "temperature_loss": "alpha"}, "temperature_loss='alpha'"),
        ("sac", {**resolved("sac", {}), "some_new_key": 1}, "some_new_key=1 (RL Zoo's files have no form of it"),
        ("sac", resolved("sac", {"gamma": 0.9}, normalize={"gamma": 0.99}), "normalize.gamma=0.99"),
        ("a2c", {}, "--algo a2c"),
        ("ddpg", resolved("ddpg", {"policy_delay": 2}), "policy_delay=2 (SBX's DDPG has policy_delay=1)"),
    ],
)
def test_refusals_name_the_setting(algo, resolved_entry, named):
    with pytest.raises(Untranslatable, match="SBX cannot express") as refused:
        peer_entry(algo, resolved_entry)
    assert named in str(refused.value)


def test_sbx_own_values_are_not_refused():
    _, zoo = peer_entry("sac", {**resolved("sac", {}), "temperature_loss": "log_alpha"})
    assert "temperature_loss" not in zoo and "precision" not in zoo and "target_update_interval" not in zoo


def test_td3_and_ddpg_entries_by_hand():
    """RL Zoo's HalfCheetah TD3 entry (normal noise 0.1) and DDPG with Ornstein-Uhlenbeck noise: RL Zoo's own noise
    keys; DDPG without the keys SBX's DDPG fixes itself, with its one critic and its critic learning rate."""
    entry = {"learning_starts": 10_000, "noise_type": "normal", "noise_std": 0.1, "train_freq": 1}
    algo, zoo = peer_entry("td3", resolved("td3", entry))
    assert algo == "td3"
    assert {key: zoo[key] for key in ("noise_type", "noise_std", "policy_delay", "tau")} == {
        "noise_type": "normal",
        "noise_std": 0.1,
        "policy_delay": 2,
        "tau": 0.005,
    }
    assert (zoo["target_policy_noise"], zoo["target_noise_clip"], zoo["policy_kwargs"]["n_critics"]) == (0.2, 0.5, 2)
    algo, zoo = peer_entry("ddpg", resolved("ddpg", {"noise_type": "ornstein-uhlenbeck", "noise_std": 0.5}))
    assert algo == "ddpg"
    assert not {"policy_delay", "target_policy_noise", "target_noise_clip", "stats_window_size"} & set(zoo)
    assert (zoo["noise_type"], zoo["noise_std"], zoo["qf_learning_rate"]) == ("ornstein-uhlenbeck", 0.5, 1e-3)
    assert zoo["policy_kwargs"]["n_critics"] == 1
    _, zoo = peer_entry("td3", resolved("td3", {}))
    assert "noise_type" not in zoo and "noise_std" not in zoo  # no action noise: RL Zoo's default


def test_dqn_entry_by_hand_and_what_sbx_dqn_cannot_express():
    """RL Zoo's CartPole-v1 DQN entry as rlbench resolves it: SBX's DQN takes every key (the target interval and
    the exploration schedule included); stats_window_size stays SB3's; a gradient clip or a net_arch other than
    two equal layers (SBX's QNetwork) is refused by name."""
    resolved = {
        "batch_size": 64, "buffer_size": 100000, "exploration_final_eps": 0.04, "exploration_fraction": 0.16,
        "exploration_initial_eps": 1.0, "gamma": 0.99, "gradient_steps": 128, "learning_rate": 0.0023,
        "learning_starts": 1000, "max_grad_norm": None, "n_envs": 1, "n_timesteps": 50000, "policy": "MlpPolicy",
        "policy_kwargs": {"net_arch": [256, 256], "activation_fn": "relu"}, "precision": "float32",
        "stats_window_size": 100, "target_update_interval": 10, "tau": 1.0, "train_freq": 256,
    }  # fmt: skip
    algo, entry = peer_entry("dqn", resolved)
    expected = {key: value for key, value in resolved.items() if key not in ("max_grad_norm", "precision")}
    del expected["stats_window_size"]
    assert (algo, entry) == ("dqn", {**expected, "policy_kwargs": {"net_arch": [256, 256]}})
    with pytest.raises(Untranslatable, match=r"max_grad_norm=10.0 \(SBX's DQN does not clip the gradient\)"):
        peer_entry("dqn", {**resolved, "max_grad_norm": 10.0})
    uneven = {**resolved, "policy_kwargs": {"net_arch": [64, 32]}}
    with pytest.raises(Untranslatable, match=r"net_arch=\[64, 32\] \(SBX's DQN has two hidden layers"):
        peer_entry("dqn", uneven)
    with pytest.raises(Untranslatable, match="--algo qrdqn"):
        peer_entry("qrdqn", resolved)


def test_dqn_cnn_policy_is_sbxs_nature_cnn_of_features_dim_units_and_atari_wrappers_pass_by_name():
    """SBX's DQN CnnPolicy is NatureCNN(net_arch[0]) then the Q head (256 features unless told): rlbench's (SB3's)
    net_arch [] and features_dim N are SBX's net_arch [N, N]; a layer after NatureCNN it cannot build."""
    atari = {
        "env_wrapper": [{"stable_baselines3.common.atari_wrappers.AtariWrapper": {}}], "frame_stack": 4,
        "policy": "CnnPolicy", "n_envs": 1,
        "policy_kwargs": {"net_arch": [], "activation_fn": "relu", "features_extractor_kwargs": {"features_dim": 512}},
    }  # fmt: skip
    _, entry = peer_entry("dqn", atari)
    assert entry["policy_kwargs"] == {"net_arch": [512, 512]}
    assert entry["env_wrapper"] == atari["env_wrapper"] and entry["frame_stack"] == 4 and entry["policy"] == "CnnPolicy"
    with pytest.raises(Untranslatable, match=r"net_arch=\[64\] \(SBX's DQN CnnPolicy has no layer after NatureCNN\)"):
        peer_entry("dqn", {**atari, "policy_kwargs": {**atari["policy_kwargs"], "net_arch": [64]}})
