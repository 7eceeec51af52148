"""Image observations: which spaces are images, and how they travel flat while remembering their shape.

An image is what SB3's `is_image_space` calls one (channels last here): a uint8 Box of three axes
[height, width, channels] bounded by 0 and 255. The loops move every observation as one flat row per env,
so an image is flattened like any other Box, but keeps its dtype (uint8: a quarter of float32's bytes in the
replay buffer and the rollout) and its shape, which the convolutional trunk needs to see pixels again and
which the manifest records (rlbench.run.probe.describe_space). The networks scale pixels to [0, 1] on the
way in, as SB3's `preprocess_obs` does for an image under every policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

IMAGE_DTYPE = "uint8"


def is_image(shape: Sequence[int], dtype: str, low: Any, high: Any) -> bool:
    """SB3's test (is_image_space, without its channel check): uint8, three axes, bounds exactly 0 and 255."""
    if dtype != IMAGE_DTYPE or len(shape) != 3:
        return False
    return bool(np.all(np.asarray(low) == 0) and np.all(np.asarray(high) == 255))


def is_image_space(space: gym.Space[Any]) -> bool:
    return isinstance(space, gym.spaces.Box) and is_image(space.shape, str(space.dtype), space.low, space.high)


class FlatImageBox(gym.spaces.Box):
    """The flat Box of an image's pixels that remembers the image's shape [height, width, channels]."""

    def __init__(self, image_shape: tuple[int, ...], seed: int | None = None):
        size = int(np.prod(image_shape))
        super().__init__(0, 255, (size,), np.uint8, seed=seed)
        self.image_shape = tuple(int(n) for n in image_shape)


class FlattenImage(gym.ObservationWrapper[np.ndarray, Any, np.ndarray]):
    """An image env's observations as flat uint8 rows (C order, so reshaping restores [H, W, C])."""

    def __init__(self, env: gym.Env[np.ndarray, Any]):
        super().__init__(env)
        self.observation_space = FlatImageBox(tuple(env.observation_space.shape or ()))

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation, np.uint8).reshape(-1)


def recorded_shape(space: gym.spaces.Box) -> tuple[int, ...]:
    """The shape a manifest records: an image's own, else the (flat) space's."""
    return space.image_shape if isinstance(space, FlatImageBox) else tuple(space.shape)
