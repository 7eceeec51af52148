"""RL Zoo's Atari preprocessing on EnvPool's Atari pools (`--env envpool:Breakout-v5`).

EnvPool steps its Atari games in C++ with the same preprocessing built in: no-op starts, frame skip with the max of
the last two frames, episodic life, fire reset, 84x84 grey frames resized with INTER_AREA, reward clipping and a
frame stack, each an option of the pool. A gymnasium wrapper cannot wrap a pool, so the `atari` entries'
`env_wrapper: stable_baselines3.common.atari_wrappers.AtariWrapper` (its keyword arguments, SB3's defaults) and
`frame_stack` become those options here (`pool_kwargs`); any other wrapper is refused. What differs from the
gymnasium path (rlbench.envs.atari): EnvPool's v5 games end at 27,000 agent steps (108,000 frames), and its games'
lengths in the Monitor files and evaluations are agent steps (EnvPool reports no frame count); scores are the raw
game scores in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlbench.envs.atari import AtariWrapper, is_atari
from rlbench.envs.envpool_vector import task_id
from rlbench.envs.observations import FrameStack
from rlbench.envs.wrappers import EnvWrapper
from rlbench.errors import ConfigError

# SB3's AtariWrapper keyword arguments -> EnvPool's Atari options.
POOL_OPTIONS = {
    "noop_max": ("noop_max",),
    "frame_skip": ("frame_skip",),
    "screen_size": ("img_height", "img_width"),
    "terminal_on_life_loss": ("episodic_life",),
    "clip_reward": ("reward_clip",),
    "action_repeat_probability": ("repeat_action_probability",),
}
# SB3's defaults, and what SB3's wrapper always does: grey frames, INTER_AREA, fire reset where the game has FIRE.
ATARI_DEFAULTS = {
    "noop_max": 30,
    "frame_skip": 4,
    "img_height": 84,
    "img_width": 84,
    "episodic_life": True,
    "reward_clip": True,
    "repeat_action_probability": 0.0,
    "gray_scale": True,
    "use_inter_area_resize": True,
    "use_fire_reset": True,
    "zero_discount_on_life_loss": False,
}


def pool_kwargs(env_id: str, wrappers: Sequence[EnvWrapper], env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The pool's options: `env_kwargs`, over (for the AtariWrapper) SB3's preprocessing as EnvPool's options and
    `frame_stack` as its stack (1 without). ConfigError for any other wrapper: nothing can wrap a pool."""
    others = [w.name for w in wrappers if w.wrapper_class not in (AtariWrapper, FrameStack)]
    if others:
        raise ConfigError(
            f"env_wrapper: {env_id} steps in EnvPool's C++ threads, which gymnasium wrappers cannot wrap; drop "
            f"{', '.join(others)} or train on gymnasium's env (EnvPool's Atari games take RL Zoo's AtariWrapper "
            "and frame_stack as their own options)"
        )
    atari = [w for w in wrappers if w.wrapper_class is AtariWrapper]
    if atari and not is_atari(task_id(env_id)):
        raise ConfigError(f"env_wrapper: AtariWrapper wraps Atari games; {env_id} is not one of EnvPool's")
    if not atari:
        if wrappers:
            raise ConfigError(f"frame_stack: {env_id} stacks frames only as RL Zoo's Atari entries ask (AtariWrapper)")
        return dict(env_kwargs)
    options = dict(ATARI_DEFAULTS)
    for key, value in atari[0].kwargs.items():
        if key not in POOL_OPTIONS:
            raise ConfigError(f"env_wrapper: AtariWrapper has no argument {key!r}; valid: {', '.join(POOL_OPTIONS)}")
        for option in POOL_OPTIONS[key]:
            options[option] = value
    stacks = [int(w.kwargs["n_stack"]) for w in wrappers if w.wrapper_class is FrameStack]
    options["stack_num"] = stacks[0] if stacks else 1
    return {**options, **env_kwargs}
