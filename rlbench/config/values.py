"""RL Zoo's format of hyperparameter values, parsed without eval into plain Python values.

Every algorithm's key reader (rlbench/config/algorithms/<algo>.py) reads its keys with these, so that
`lin_7.3e-4`, `auto_0.1`, `nn.ReLU` or `dict(pi=[64], qf=[400, 300])` mean the same everywhere. Each
raises `ConfigError` naming the key and what would be valid.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any, Literal, cast, overload

from rlbench.algos.common.schedules import ConstantSchedule, LinearSchedule, Schedule
from rlbench.algos.soft.temperature import EntropyCoef
from rlbench.errors import ConfigError
from rlbench.networks.mlp import ACTIVATIONS, Activation, Family
from rlbench.networks.trunk import POLICIES


def unknown_key(key: str, valid: tuple[str, ...], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown hyperparameter {key!r} in {where}{hint} (valid: {', '.join(sorted(valid))})")


INT_MAX = 2**63 - 1  # every integer setting must fit the int64 counters and shapes it ends up in


@overload
def number(
    params: Mapping[str, Any],
    key: str,
    kind: type[int],
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> int: ...


@overload
def number(
    params: Mapping[str, Any],
    key: str,
    kind: type[float],
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float: ...


def number(
    params: Mapping[str, Any],
    key: str,
    kind: type[int] | type[float],
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> int | float:
    """params[key] as a finite `kind` (int or float) within the range; ConfigError naming the key otherwise."""
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"{key}: expected a finite number, got {value!r}"
            + (" (too large: a float setting must be finite)" if math.isinf(value) else "")
        )
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        if abs(value) > INT_MAX:
            raise ConfigError(f"{key}: {value!r} is too large (an integer setting must fit 64 bits, |x| <= 2**63-1)")
        value = int(value)
    else:
        value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ConfigError(f"{key}: {value!r} is out of range {lo}{low}, {high if high is not None else 'inf'}{hi}")
    return value


def positive_int(value: object, name: str) -> int:
    """A count (n_envs, n_timesteps, episodes): an integer in [1, 2**63-1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
    if value > INT_MAX:
        raise ConfigError(f"{name}: {value!r} is too large (an integer setting must fit 64 bits, at most 2**63-1)")
    if (isinstance(value, float) and not value.is_integer()) or value < 1:
        raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def literal_mapping(value: object, name: str) -> dict[str, Any]:
    """A kwargs dict (env_kwargs, policy_kwargs): a mapping with string keys; None is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a dict of keyword arguments, got {value!r}")
    for key in value:
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(f"{name}: {key!r} is not a valid keyword argument name (expected dict(name=value, ...))")
    return dict(value)


def parse_schedule(key: str, value: object) -> Schedule:
    """A float (constant) or RL Zoo's `lin_<x>` (linear from x to 0 over training)."""
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            start = float(value[4:])
        except ValueError:
            raise ConfigError(f"{key}: cannot read {value!r}; expected lin_<float>, e.g. lin_7.3e-4") from None
        schedule: Schedule = LinearSchedule(start)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        schedule = ConstantSchedule(float(value))
    else:
        raise ConfigError(f"{key}: expected a positive number or lin_<float>, got {value!r}")
    if not math.isfinite(schedule.initial) or schedule.initial <= 0:
        raise ConfigError(f"{key}: expected a finite number > 0, got {value!r}")
    return schedule


def parse_ent_coef(value: object) -> EntropyCoef:
    """`auto` (learned from 1.0), `auto_<x>` (learned from x) or a positive float (fixed)."""
    if value == "auto":
        return EntropyCoef(initial=1.0, learned=True)
    if isinstance(value, str) and value.startswith("auto_"):
        try:
            initial = float(value[5:])
        except ValueError:
            initial = -1.0
        if math.isfinite(initial) and initial > 0:
            return EntropyCoef(initial=initial, learned=True)
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return EntropyCoef(initial=float(value), learned=False)
    raise ConfigError(
        f"ent_coef: expected 'auto', 'auto_<positive finite float>' or a positive finite float, got {value!r}"
    )


def parse_activation(value: object) -> Activation:
    name = str(value)
    # RL Zoo spells torch classes: nn.ReLU, th.nn.Tanh, torch.nn.SiLU.
    short = name.rsplit(".", 1)[-1].lower()
    aliases = {"leakyrelu": "leaky_relu"}
    short = aliases.get(short, short)
    if short not in ACTIVATIONS:
        raise ConfigError(f"activation_fn: unknown {value!r}; valid: {', '.join(ACTIVATIONS)} (or nn.ReLU style)")
    return cast(Activation, short)  # one of ACTIVATIONS' keys, the Activation names


def parse_policy(value: object, actor_hidden: tuple[int, ...], critic_hidden: tuple[int, ...]) -> Family:
    """The network family RL Zoo's `policy` names (MlpPolicy, SimbaPolicy), checked against net_arch: a
    SimBa trunk is one residual width, each entry of net_arch one block of it."""
    valid = ", ".join(POLICIES)
    if value == "MultiInputPolicy":
        raise ConfigError(
            f"policy: 'MultiInputPolicy' is for dict observations, which rlbench does not support (its learners "
            f"take one Box observation); valid: {valid}"
        )
    if not isinstance(value, str) or value not in POLICIES:
        raise ConfigError(f"policy: {value!r} is not supported; valid: {valid}")
    if POLICIES[value] == "simba":
        for name, widths in (("pi", actor_hidden), ("qf", critic_hidden)):
            if len(set(widths)) != 1:
                raise ConfigError(
                    f"net_arch['{name}']: SimbaPolicy's residual blocks keep one width (one entry per block), "
                    f"got {list(widths)}"
                )
    return cast(Family, POLICIES[value])  # POLICIES' values are the Family names


def parse_net_arch(value: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A list (shared by actor and critic) or dict(pi=[...], qf=[...]) -> (actor, critic) widths."""

    if isinstance(value, Mapping):
        extra = set(value) - {"pi", "qf"}
        if extra or not {"pi", "qf"} <= set(value):
            raise ConfigError(f"net_arch: a dict needs exactly the keys pi and qf, got {sorted(value)}")
        return layer_widths(value["pi"], "['pi']"), layer_widths(value["qf"], "['qf']")
    shared = layer_widths(value, "")
    return shared, shared


def layer_widths(value: object, where: str) -> tuple[int, ...]:
    """One network's hidden widths: a list of positive integers (net_arch, or net_arch[<where>])."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in value
    ):
        raise ConfigError(f"net_arch{where}: expected a list of positive integers, got {value!r}")
    return tuple(value)


def resolve_gradient_steps(params: Mapping[str, Any], n_envs: int) -> int:
    """gradient_steps = -1 means as many gradient steps as env steps collected per training iteration:
    train_freq * n_envs with a train_freq in steps. With one in episodes that number varies, so -1 stays
    (the loop counts the steps of each rollout)."""
    gradient_steps = params.get("gradient_steps", 1)
    if gradient_steps == -1:
        train_freq, unit = parse_train_freq(params)
        return train_freq * n_envs if unit == "step" else -1
    return number({"gradient_steps": gradient_steps}, "gradient_steps", int, 1)


TrainFreqUnit = Literal["step", "episode"]
TRAIN_FREQ_UNITS: tuple[TrainFreqUnit, ...] = ("step", "episode")


def parse_train_freq(params: Mapping[str, Any]) -> tuple[int, TrainFreqUnit]:
    """(count, unit) of RL Zoo's train_freq: n (vector steps), [n, 'step'] or [n, 'episode'] (SB3's TrainFreq)."""
    value = params.get("train_freq", 1)
    unit: TrainFreqUnit = "step"
    if isinstance(value, list | tuple):
        if len(value) != 2 or value[1] not in TRAIN_FREQ_UNITS:
            raise ConfigError(f"train_freq: expected n, [n, 'step'] or [n, 'episode'], got {value!r}")
        value, unit = value
    return number({"train_freq": value}, "train_freq", int, 1), unit
