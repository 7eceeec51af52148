"""Image observations: NatureCNN against SB3's formula, pixels kept as uint8 in the replay buffer and its
checkpoint arrays, the manifest's image shape, the policies' refusals, and episodes an env reports itself."""

import re

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.buffers.uniform import (
    buffer_from_arrays,
    buffer_to_arrays,
    bytes_per_transition,
    check_buffer_arrays,
    make_uniform_buffer,
)
from rlbench.envs.images import FlatImageBox, is_image_space
from rlbench.envs.make import make_single_env
from rlbench.envs.reported import ReportedEpisodes
from rlbench.networks.action_values import ActionValues
from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.nature_cnn import (
    Features,
    NatureCNN,
    PatchConv,
    conv_output_side,
    nature_cnn_parameter_count,
)
from rlbench.run.probe import describe_space, spaces_spec
from rlbench.store.host_state import EpisodeTracker
from rlbench.types import EnvSpec, Transition
from tests.variants import slow_variant

ATARI = (84, 84, 4)
CNN = Features(extractor="nature_cnn")


def parameter_count(params) -> int:
    return sum(leaf.size for leaf in jax.tree.leaves(params))


def test_nature_cnn_has_sb3s_parameter_count_and_output():
    """SB3's NatureCNN on 84x84x4 frames, counted by hand: conv 8x8x4x32 + 32, 4x4x32x64 + 64, 3x3x64x64 + 64,
    then a 7x7x64 = 3136 -> 512 dense layer: 8,224 + 32,832 + 36,928 + 1,606,144 = 1,684,128. (Shapes only:
    jax.eval_shape runs nothing.)"""
    net = NatureCNN(ATARI)
    obs = jax.ShapeDtypeStruct((5, int(np.prod(ATARI))), jnp.uint8)
    params = jax.eval_shape(net.init, jax.random.key(0), obs)
    assert parameter_count(params) == nature_cnn_parameter_count(ATARI) == 1_684_128
    assert jax.eval_shape(net.apply, params, obs).shape == (5, 512)
    assert conv_output_side(84) == 7 and conv_output_side(36) == 1 and conv_output_side(35) == 0


@pytest.mark.parametrize(
    "kernel,stride,height,width", [(4, 2, 9, 9), slow_variant(8, 4, 13, 17), slow_variant(3, 1, 5, 6)]
)
def test_patch_convolution_equals_xlas_convolution_and_its_gradients(kernel, stride, height, width):
    """NatureCNN's layers as patches times the kernel (PatchConv: fast inside lax.scan) compute XLA's unpadded
    convolution, and its gradients for the kernel, the bias and the input (the layers below it)."""
    x = jax.random.normal(jax.random.key(0), (2, height, width, 3))
    conv = PatchConv(4, kernel, stride)
    params = conv.init(jax.random.key(1), x)

    def reference(params, x):
        weights, bias = params["params"]["kernel"], params["params"]["bias"]
        layout = ("NHWC", "HWIO", "NHWC")
        return jax.lax.conv_general_dilated(x, weights, (stride, stride), "VALID", dimension_numbers=layout) + bias

    def value_and_grads(apply):  # one compiled program each (eager ops compile one by one)
        return jax.jit(jax.value_and_grad(lambda p, x: jnp.sum(jnp.sin(apply(p, x))), (0, 1)))(params, x)

    np.testing.assert_allclose(jax.jit(conv.apply)(params, x), jax.jit(reference)(params, x), rtol=1e-5, atol=1e-5)
    ours, theirs = value_and_grads(conv.apply), value_and_grads(reference)
    for got, want in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_pixels_are_scaled_by_255_before_the_network():
    """The uint8 path equals the same network fed the image as floats in [0, 1] (SB3's preprocess_obs)."""
    pixels = jax.random.randint(jax.random.key(1), (2, 36 * 36), 0, 256).astype(jnp.uint8)
    for features in (CNN, Features()):
        net = ActionValues(NetworkConfig(hidden=(8,)), 4, features=features, image_shape=(36, 36, 1))
        params = jax.jit(net.init)(jax.random.key(0), pixels)
        apply = jax.jit(net.apply)  # one program per input dtype
        as_floats = pixels.astype(jnp.float32) / 255.0
        np.testing.assert_allclose(apply(params, pixels), apply(params, as_floats), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "image_shape,message",
    [
        ((), "CnnPolicy reads images .* the env observes a flat vector of 4 values: use MlpPolicy"),
        ((35, 40, 3), r"at least 36 x 36 pixels .* the env's are \[35, 40, 3\]"),
    ],
)
def test_cnn_policy_refuses_what_nature_cnn_cannot_read(image_shape, message):
    refusal = CNN.refusal(image_shape, 4)
    assert refusal is not None and re.search(message, refusal)
    assert CNN.refusal((36, 36, 1), 1296) is None and Features().refusal((), 4) is None


def image_transitions(n: int, spec: EnvSpec, key: int) -> Transition:
    obs_key, next_key = jax.random.split(jax.random.key(key))
    pixels = lambda k: jax.random.randint(k, (n, spec.obs_dim), 0, 256).astype(jnp.uint8)  # noqa: E731
    return Transition(
        obs=pixels(obs_key),
        action=jnp.arange(n, dtype=jnp.float32)[:, None] % spec.n_actions,
        reward=jnp.linspace(-1, 1, n),
        next_obs=pixels(next_key),
        terminated=(jnp.arange(n) % 3 == 0).astype(jnp.float32),
    )


IMAGE_SPEC = EnvSpec(obs_dim=6 * 6 * 2, action_dim=1, n_actions=3, image_shape=(6, 6, 2))


def test_the_replay_buffer_keeps_pixels_as_uint8_and_samples_them_exactly():
    buffer = make_uniform_buffer(8, IMAGE_SPEC)
    state = buffer.add_fn(buffer.init_fn(), image_transitions(5, IMAGE_SPEC, 0))
    assert state.pixels.dtype == jnp.uint8 and state.pixels.shape == (8, 2 * 72) and state.rows.shape == (8, 3)
    assert bytes_per_transition(IMAGE_SPEC) == 2 * 72 + 4 * 3
    assert bytes_per_transition(EnvSpec(72, 1, 3)) == 4 * (2 * 72 + 3)  # float observations: one float row
    added = image_transitions(5, IMAGE_SPEC, 0)
    sample = buffer.sample_fn(state, jax.random.key(3), 64)
    assert sample.obs.dtype == jnp.uint8
    # Every sampled row is one added transition, all fields from the same row.
    for row in range(64):
        (match,) = np.flatnonzero((np.asarray(added.obs) == np.asarray(sample.obs[row])).all(axis=1))
        np.testing.assert_array_equal(sample.next_obs[row], added.next_obs[match])
        assert float(sample.reward[row]) == float(added.reward[match])
        assert float(sample.terminated[row]) == float(added.terminated[match])


def test_image_buffer_checkpoint_arrays_round_trip_and_forged_pixels_are_refused():
    buffer = make_uniform_buffer(8, IMAGE_SPEC)
    state = buffer.add_fn(buffer.init_fn(), image_transitions(5, IMAGE_SPEC, 1))
    arrays = buffer_to_arrays(state)
    assert arrays["pixels"].dtype == np.uint8 and arrays["pixels"].shape == (5, 144)
    restored = buffer_from_arrays(buffer, arrays)
    for leaf, original in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(leaf, original)
    forged = {**arrays, "pixels": arrays["pixels"].astype(np.float32)}
    with pytest.raises(ValueError, match=r"replay_buffer/pixels.npy holds float32\[5, 144\], expected uint8\[5, 144\]"):
        check_buffer_arrays(8, IMAGE_SPEC, forged)
    assert "pixels" not in buffer_to_arrays(make_uniform_buffer(4, EnvSpec(3, 1)).init_fn())  # vectors: no member


def test_an_image_env_travels_flat_as_uint8_and_the_manifest_records_its_shape():
    env = make_single_env("tests.envs:BrightSide-v0", {})
    space = env.observation_space
    assert isinstance(space, FlatImageBox) and space.shape == (1296,) and space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.uint8 and obs.shape == (1296,) and set(np.unique(obs)) == {0, 255}
    record = describe_space(space)
    assert record["shape"] == [36, 36, 1] and record["dtype"] == "uint8"
    spec = spaces_spec({"observation": record, "action": describe_space(env.action_space)})
    assert spec == EnvSpec(1296, 1, 2, (36, 36, 1)) and spec.obs_dtype is np.uint8
    # SB3's test: uint8, three axes, bounds 0 and 255; anything else is a vector.
    assert not is_image_space(gym.spaces.Box(0, 1, (36, 36, 1), np.uint8))
    assert not is_image_space(gym.spaces.Box(0, 255, (36, 36), np.uint8))


def test_reported_episodes_replace_the_agents_in_the_episode_counts():
    """Atari's lives end the agent's episodes; the games the env reports are what the Monitor files count."""
    tracker = EpisodeTracker(2)
    no_games = ReportedEpisodes(np.zeros(2, bool), np.zeros(2), np.zeros(2, np.int64))
    assert tracker.step(np.array([1.0, 1.0]), np.array([True, False]), reported=no_games) == []  # a life lost
    game = ReportedEpisodes(np.array([True, False]), np.array([7.0, 0.0]), np.array([400, 0]))
    assert tracker.step(np.array([1.0, 1.0]), np.array([True, False]), reported=game) == [(0, 7.0, 400)]
    assert tracker.finished_returns == [7.0] and tracker.finished_lengths == [400]
    assert tracker.lengths.tolist() == [0, 2]  # the agent's running episode restarted at each life
