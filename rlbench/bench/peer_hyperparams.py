"""rlbench's resolved hyperparameter entry in RL Zoo's format for SBX: the peer of `bench returns --peer`.

rlbench reads RL Zoo's files and writes its resolved entry back in the same format (config.yml,
`Experiment.hyperparams`), with its own forms where it differs: `activation_fn: relu` for `nn.ReLU`,
`ent_coef: auto_1.0` for `auto`, `precision`, `target_update_interval` and a full `normalize` dict.
`peer_entry` turns that entry into the RL Zoo hyperparameter entry with which SBX trains the same learner
(`python -m rl_zoo3.train --conf-file`, with SBX's classes as RL Zoo's algorithms): every setting is
written out, so neither side's defaults decide anything. A setting SBX 0.28 cannot express (a bfloat16
learner, an activation other than SBX's own, gSDE, a target update interval, CrossQ with quantile critics,
PPO's clip_range_vf or target_kl, a key this table does not know) is refused by name: `Untranslatable`,
reported per cell, never dropped. SBX 0.28 has no A2C (`missing_peers`: the commands refuse it at once).

PPO: SBX's PPO takes RL Zoo's keys (n_steps, batch_size, n_epochs, gamma, gae_lambda, clip_range and
learning_rate with their `lin_` schedules, ent_coef, vf_coef, max_grad_norm, normalize_advantage, normalize,
policy_kwargs net_arch, ortho_init and log_std_init). It differs from SB3's and rlbench's PPO where no key
can say so (PEER_DIFFERENCES, printed in the report): its `ortho_init=True` initialises only the action
head orthogonally (gain 0.01), the other layers with flax's default; each of its two optimizers clips its
own network's gradient norm; it normalizes advantages with the population std. Its `use_sde` repeats one
noise key instead of gSDE's state-dependent noise, its `clip_range_vf` is unused and its `target_kl` adapts
the learning rate instead of stopping the epochs: those are refused. Its activation goes by flax.linen
name (an RL Zoo YAML entry cannot name a flax function; the peer's process looks the name up in a fixed table),
and it takes no stats_window_size (SB3's 100).

DQN: SBX's DQN takes RL Zoo's keys (tau, target_update_interval, the exploration schedule's three, train_freq,
gradient_steps, learning_starts, batch_size, buffer_size); it has no gradient clipping (a max_grad_norm is
refused), no stats_window_size, and two hidden layers of net_arch[0] units (another net_arch is refused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rlbench.networks.mlp import ACTIVATIONS

SBX_VERSION = "0.28"  # the peer these tables describe

# rlbench's --algo -> RL Zoo's --algo with SBX's classes (DroQ is SAC with a dropout and layer-norm critic).
PEER_ALGOS = {
    "sac": "sac", "droq": "sac", "tqc": "tqc", "crossq": "crossq", "td3": "td3", "ddpg": "ddpg", "ppo": "ppo",
    "dqn": "dqn",
}  # fmt: skip
# SBX's classes by RL Zoo's algorithm name: what the peer's process puts in RL Zoo's table (SBX 0.28).
SBX_CLASSES = {"sac": "SAC", "tqc": "TQC", "crossq": "CrossQ", "td3": "TD3", "ddpg": "DDPG", "ppo": "PPO", "dqn": "DQN"}

# Keys written as they are: RL Zoo reads them (n_envs, n_timesteps, policy, normalize, env_wrapper,
# frame_stack, env_kwargs) or passes them to SBX's constructor, which has the same meaning.
SAME_KEYS = (
    "n_timesteps",
    "n_envs",
    "policy",
    "frame_stack",
    "stats_window_size",
    "learning_rate",
    "buffer_size",
    "learning_starts",
    "batch_size",
    "gamma",
    "train_freq",
    "gradient_steps",
    "policy_delay",
    "target_entropy",
    "use_sde",
)
OWN_KEYS = {
    "sac": ("tau",),
    "droq": ("tau",),
    "tqc": ("tau", "top_quantiles_to_drop_per_net"),
    "crossq": (),
    "td3": ("tau", "target_policy_noise", "target_noise_clip", "noise_std"),
    "ddpg": ("tau", "noise_std"),
    "ppo": ("n_steps", "n_epochs", "gae_lambda", "clip_range", "vf_coef", "max_grad_norm", "normalize_advantage"),
    "dqn": (
        "tau",
        "target_update_interval",
        "exploration_fraction",
        "exploration_initial_eps",
        "exploration_final_eps",
    ),
}
# What SBX's DDPG constructor does not take: TD3's tricks, which it fixes off, and stats_window_size, which stays
# SB3's 100. rlbench's DDPG must have the same values; they are left out of the entry. SBX's PPO takes no
# stats_window_size either.
DDPG_FIXED = {"policy_delay": 1, "target_policy_noise": 0.0, "target_noise_clip": 0.0, "stats_window_size": 100}
FIXED: dict[str, dict[str, float]] = {
    "ddpg": DDPG_FIXED, "ppo": {"stats_window_size": 100}, "dqn": {"stats_window_size": 100},
}  # fmt: skip
SAME_POLICY_KWARGS = ("net_arch", "n_critics", "dropout_rate", "layer_norm", "optimizer_kwargs")
OWN_POLICY_KWARGS = {
    "tqc": ("n_quantiles",),
    "crossq": ("batch_norm", "batch_norm_actor", "batch_norm_momentum", "renorm_warmup_steps"),
    "ppo": ("ortho_init", "log_std_init"),  # SBX's ortho_init is not SB3's: PEER_DIFFERENCES
}
# Settings SBX has one value of: any other is refused, with the reason.
ONLY_VALUE: dict[str, tuple[object, str]] = {
    "precision": ("float32", "SBX trains in float32"),
    "target_update_interval": (1, "SBX updates the target critics at every gradient step"),
    "use_sde": (False, "SBX's SAC-family policies only repeat one noise key (no state-dependent exploration)"),
    "temperature_loss": ("log_alpha", "SBX 0.28 minimises -log(alpha) * (log_prob + target_entropy)"),
}
# An algorithm's own only values, over ONLY_VALUE's; a value of None is left out of the entry (SBX's default).
OWN_ONLY_VALUE: dict[str, dict[str, tuple[object, str]]] = {
    "ppo": {
        "use_sde": (False, "SBX's PPO repeats one noise key instead of gSDE's state-dependent noise"),
        "clip_range_vf": (None, "SBX 0.28's PPO leaves clip_range_vf unused: its value loss is never clipped"),
        "target_kl": (None, "SBX's PPO adapts the learning rate to target_kl; rlbench, as SB3, stops the epochs"),
    },
    "dqn": {"max_grad_norm": (None, "SBX's DQN does not clip the gradient")},
}
ONLY_POLICY_KWARG = {"activation_fn": ("relu", "an RL Zoo YAML entry cannot name a flax activation; SBX's is relu")}
# PPO's activation goes to the peer by its flax.linen name (RL Zoo's MuJoCo entries use ReLU, SBX's PPO's default
# is tanh): the peer's bootstrap (rlbench.bench.peer) and bench speed's PPO script look it up in this table.
NAMED_ACTIVATIONS = tuple(ACTIVATIONS)
BY_NAME_POLICY_KWARGS = {"ppo": ("activation_fn",)}
# What the peer's learner does differently where no setting can say so: the report prints it beside the runs.
PEER_DIFFERENCES = {
    "ppo": "SBX's PPO initialises its networks with flax's defaults, with ortho_init only its action head "
    "orthogonally (gain 0.01), where SB3's and rlbench's initialise every layer orthogonally (gains sqrt(2), "
    "0.01 and 1; PyTorch's defaults without ortho_init); each of its two optimizers clips its own network's "
    "gradient norm to max_grad_norm (SB3's and rlbench's: the joint norm); it normalizes advantages with the "
    "population std (SB3's and rlbench's: the sample std)",
}
GSDE_KEYS = ("sde_sample_freq", "use_sde_at_warmup")
GSDE_POLICY_KWARGS = ("log_std_init", "use_expln", "full_std", "clip_mean")
QUANTILE_CROSSQ = "CrossQ with quantile critics (CrossQ + TQC): SBX's CrossQ has none"


class Untranslatable(ValueError):
    """Settings the peer cannot express, each `name=value (why)`."""

    def __init__(self, settings: list[str]) -> None:
        super().__init__("SBX cannot express " + "; ".join(settings))
        self.settings = settings


def peer_entry(algo: str, resolved: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(RL Zoo's --algo, the hyperparameter entry) that trains `algo`'s resolved entry with SBX; Untranslatable
    naming every setting it cannot express. PPO's policy_kwargs.activation_fn stays rlbench's name of a
    flax.linen function (relu, tanh, ...), which the peer looks up in NAMED_ACTIVATIONS."""
    if algo not in PEER_ALGOS:
        raise Untranslatable([f"--algo {algo} (no SBX algorithm for it here; known: {', '.join(PEER_ALGOS)})"])
    refused: list[str] = []
    entry: dict[str, Any] = {}
    # An algorithm's own keys pass as they are, over another family's only value (DQN's target_update_interval).
    only = {
        key: rule for key, rule in {**ONLY_VALUE, **OWN_ONLY_VALUE.get(algo, {})}.items() if key not in OWN_KEYS[algo]
    }
    for key, value in _without_fixed(algo, resolved, refused).items():
        if key == "policy_kwargs":
            entry[key] = peer_policy_kwargs(algo, value or {}, refused, resolved.get("policy", "MlpPolicy"))
        elif key in only and value != only[key][0]:
            refused.append(f"{key}={value!r} ({only[key][1]})")
        elif key in only and only[key][0] is None:
            continue  # None: the setting is off, as SBX's default has it
        elif key in SAME_KEYS or key in OWN_KEYS[algo]:
            entry[key] = value
        elif key in only or key in GSDE_KEYS:
            continue  # SBX's only value (gSDE's keys come with use_sde, refused above)
        elif key in SPELLED:
            SPELLED[key](entry, value, resolved, refused)
        else:
            refused.append(f"{key}={value!r} (RL Zoo's files have no form of it for SBX's {PEER_ALGOS[algo]})")
    if refused:
        raise Untranslatable(refused)
    return PEER_ALGOS[algo], dict(sorted(entry.items()))


def _without_fixed(algo: str, resolved: Mapping[str, Any], refused: list[str]) -> Mapping[str, Any]:
    """The entry without the keys SBX's class fixes itself (refused where rlbench's values differ)."""
    fixed_values = FIXED.get(algo, {})
    for key, fixed in fixed_values.items():
        if key in resolved and resolved[key] != fixed:
            refused.append(f"{key}={resolved[key]!r} (SBX's {algo.upper()} has {key}={fixed!r})")
    return {key: value for key, value in resolved.items() if key not in fixed_values}


def missing_peers(algos: Iterable[str]) -> str | None:
    """One line refusing `--peer` for the algorithms SBX has no class for (A2C), None when it has all."""
    missing = [algo for algo in dict.fromkeys(algos) if algo not in PEER_ALGOS]
    if not missing:
        return None
    return (
        f"--peer: SBX {SBX_VERSION} has no {', '.join(algo.upper() for algo in missing)}, so nothing can train "
        f"{' '.join(missing)} beside rlbench; run it without --peer (SBX's peers here: {', '.join(PEER_ALGOS)})"
    )


def peer_policy_kwargs(
    algo: str, kwargs: Mapping[str, Any], refused: list[str], policy: str = "MlpPolicy"
) -> dict[str, Any]:
    if algo == "dqn" and policy == "CnnPolicy":
        kwargs = dqn_cnn_policy_kwargs(kwargs, refused)
    out = {}
    passed = (*SAME_POLICY_KWARGS, *OWN_POLICY_KWARGS.get(algo, ()), *CNN_POLICY_KWARGS.get(algo, ()))
    only = ONLY_POLICY_KWARG
    for key, value in kwargs.items():
        name = f"policy_kwargs.{key}={value!r}"
        if key in BY_NAME_POLICY_KWARGS.get(algo, ()):
            out[key] = value
        elif key in only:
            if value != only[key][0]:
                refused.append(f"{name} ({only[key][1]})")
        elif algo == "dqn" and key == "net_arch" and (len(value) != 2 or value[0] != value[1]):
            refused.append(f"{name} (SBX's DQN has two hidden layers of net_arch[0] units)")
        elif key in passed:
            out[key] = value
        elif key in GSDE_POLICY_KWARGS:
            continue  # with use_sde, refused at the top level
        elif algo == "crossq" and key == "n_quantiles":
            refused.append(f"{name} ({QUANTILE_CROSSQ})")
        else:
            refused.append(f"{name} (no policy_kwargs of SBX's {PEER_ALGOS[algo]} takes it)")
    return dict(sorted(out.items()))


# SBX's PPO CnnPolicy reads features_extractor_kwargs as SB3's (features_dim); its DQN's is dqn_cnn_policy_kwargs'.
CNN_POLICY_KWARGS = {"ppo": ("features_extractor_kwargs",)}


def dqn_cnn_policy_kwargs(kwargs: Mapping[str, Any], refused: list[str]) -> dict[str, Any]:
    """SBX's DQN CnnPolicy is NatureCNN of net_arch[0] features (256 when unset) and the Q head, nothing between:
    rlbench's (SB3's) net_arch [] and features_dim N are SBX's net_arch [N]."""
    out = {key: value for key, value in kwargs.items() if key not in ("net_arch", "features_extractor_kwargs")}
    if kwargs.get("net_arch", []):
        net_arch = kwargs["net_arch"]
        refused.append(f"policy_kwargs.net_arch={net_arch!r} (SBX's DQN CnnPolicy has no layer after NatureCNN)")
    features = dict(kwargs.get("features_extractor_kwargs") or {})
    out["net_arch"] = [features.get("features_dim", 512)]
    out["net_arch"] += out["net_arch"]  # its two-equal-layers form, of which the CnnPolicy reads the first
    return out


def _ent_coef(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    """rlbench writes a learned coefficient `auto_<initial>`; SBX reads the same, and `auto` for 1.0."""
    entry["ent_coef"] = "auto" if value == "auto_1.0" else value


def _qf_learning_rate(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    if value is not None:  # None: the critic follows learning_rate, SBX's default too
        entry["qf_learning_rate"] = value


def _env_kwargs(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    if value:
        entry["env_kwargs"] = dict(value)


def _normalize(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    """VecNormalize's arguments as a dict. RL Zoo sets their gamma to the entry's gamma, which the entry
    always has here: another gamma cannot be expressed."""
    if value is None or value is False:
        return
    gamma = resolved.get("gamma", 0.99)
    if isinstance(value, Mapping) and value.get("gamma", gamma) != gamma:
        refused.append(f"normalize.gamma={value['gamma']!r} (RL Zoo sets VecNormalize's gamma to gamma={gamma!r})")
        return
    entry["normalize"] = dict(value) if isinstance(value, Mapping) else value


def _env_wrapper(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    """RL Zoo's format already ({path: kwargs} per wrapper); one of rlbench's own modules is not in the peer."""
    own = [name for wrapper in value for name in wrapper if str(name).startswith("rlbench.")]
    if own:
        refused.append(f"env_wrapper {', '.join(own)} (rlbench's own wrapper: not installed in the peer)")
    else:
        entry["env_wrapper"] = [dict(wrapper) for wrapper in value]


def _noise_type(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    """RL Zoo's own keys for TD3's and DDPG's action noise; none (None) is RL Zoo's default, left out."""
    if value is not None:
        entry["noise_type"] = value


def _quantiles_of_crossq(entry: dict[str, Any], value: Any, resolved: Mapping[str, Any], refused: list[str]) -> None:
    refused.append(f"top_quantiles_to_drop_per_net={value!r} ({QUANTILE_CROSSQ})")


# (the entry being written, the value, the resolved entry, the refusals so far): writes or refuses the key.
Spelling = Callable[[dict[str, Any], Any, Mapping[str, Any], list[str]], None]
SPELLED: dict[str, Spelling] = {
    "ent_coef": _ent_coef,
    "qf_learning_rate": _qf_learning_rate,
    "env_kwargs": _env_kwargs,
    "normalize": _normalize,
    "env_wrapper": _env_wrapper,
    "top_quantiles_to_drop_per_net": _quantiles_of_crossq,  # TQC's own key is in OWN_KEYS
    "noise_type": _noise_type,
}
