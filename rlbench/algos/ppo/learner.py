"""PPO's (and A2C's) Learner: how it acts, and its update on one staged rollout.

The loop stages a rollout of n_steps vector steps on the host (obs, the action as sampled, reward, the
observation each step ended in, terminated, truncated) and makes one device call with it. The update
reads V(obs) and log pi(action | obs) of the whole rollout in one batched pass with the parameters it
starts from, which are the parameters that collected the rollout (no update happens inside one): the same
values SB3 stores step by step, without a per-step transfer of values and log-probabilities. V of each
step's final observation is the bootstrap of a truncated episode, and V of the last step's is GAE's last
value (a step that ended masks it: rlbench.algos.ppo.gae). Then GAE and the epochs (rlbench.algos.ppo.update).

Actions: a Box action is the Gaussian's sample in the loop's [-1, 1] action space, clipped only when the
envs are stepped (rlbench.loop.collect.step); evaluation and enjoy.py act with the mean, clipped. A
Discrete action is the sampled index, carried as one float column (EnvSpec.n_actions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.acting import Acting
from rlbench.algos.common.learner import Collection, Learner, no_storage
from rlbench.algos.ppo.config import PPOConfig, minibatch_size
from rlbench.algos.ppo.state import PPOState, init_state, resample_exploration
from rlbench.algos.ppo.update import LOSS_METRICS, make_update
from rlbench.algos.soft.acting import Exploration, resample_due
from rlbench.buffers.normalization import Normalization
from rlbench.buffers.rollout import RolloutState, RolloutStep
from rlbench.errors import ConfigError
from rlbench.networks.actor_critic import ActorCritic
from rlbench.networks.nature_cnn import features_units
from rlbench.types import EnvSpec, Metrics, PyTree, Transition


def make_learner(cfg: PPOConfig, spec: EnvSpec) -> Learner[PPOState]:
    if cfg.use_sde and spec.discrete:
        raise ConfigError(
            "use_sde: gSDE explores in continuous (Box) action spaces, not Discrete ones; set use_sde: False"
        )
    if (refusal := cfg.network.features.refusal(spec.image_shape, spec.obs_dim)) is not None:
        raise ConfigError(refusal)
    n_outputs = spec.n_actions if spec.discrete else spec.action_dim
    network = ActorCritic(cfg.network, n_outputs, spec.discrete, gsde=cfg.use_sde, image_shape=spec.image_shape)
    update_rollout = make_update(cfg, cfg.rollout_envs)

    def update(
        state: PPOState,
        storage_state: PyTree,
        new: Transition,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        normalization: Normalization | None,
    ) -> tuple[PPOState, PyTree, Metrics]:
        # The loop stages a rollout as the policy saw it (scaled when collected, with `normalize`): not again.
        rollout = staged_rollout(state, new, cfg.n_steps, spec)
        state, metrics = update_rollout(state, rollout, progress_remaining)
        return state, storage_state, metrics

    metric_names: tuple[str, ...] = (
        *LOSS_METRICS,
        "train/explained_variance",
        "train/learning_rate",
        "train/clip_range",
    )
    metric_names += ("train/n_updates",) + (() if spec.discrete else ("train/std",))
    if cfg.clip_range_vf is not None:
        metric_names += ("train/clip_range_vf",)
    return Learner(
        init_fn=lambda key: init_state(cfg, network, spec, key),
        update_fn=update,
        storage=no_storage(),
        collection=Collection(
            vector_steps_per_update=cfg.n_steps, learning_starts=0, per_episode=False, stages_rollout=True
        ),
        metric_names=metric_names,
        acting=ppo_acting(spec.discrete, cfg.sde_sample_freq if cfg.use_sde else None),
        parameters=lambda state: state.policy.params,
        activation_bytes=activation_bytes(cfg, spec),
    )


def staged_rollout(state: PPOState, new: Transition, n_steps: int, spec: EnvSpec) -> RolloutState:
    """The staged transitions [n_steps * n_envs, ...] (step after step) as a rollout [n_steps, n_envs, ...]
    with V(obs), log pi(action | obs) and V(final obs) from the state's parameters."""
    steps = jax.tree.map(lambda x: x.reshape(n_steps, -1, *x.shape[1:]), new)
    obs, final_obs = steps.obs, steps.next_obs
    action = steps.action[..., 0].astype(jnp.int32) if spec.discrete else steps.action
    apply = state.policy.apply_fn
    variables = {"params": state.policy.params}
    flat = obs.reshape(-1, obs.shape[-1])
    distribution, value = apply(variables, flat)
    log_prob = distribution.log_prob(action.reshape(-1, *action.shape[2:]))
    _, final_value = apply(variables, final_obs.reshape(-1, obs.shape[-1]))
    per_env = (n_steps, -1)
    rollout = RolloutStep(
        obs=obs,
        action=action,
        reward=steps.reward,
        terminated=steps.terminated,
        truncated=steps.truncated,
        final_value=final_value.reshape(per_env),
        value=value.reshape(per_env),
        log_prob=log_prob.reshape(per_env),
    )
    position = jnp.asarray(n_steps, jnp.int32)
    return RolloutState(steps=rollout, last_obs=final_obs[-1], position=position)


def policy_part(state: PPOState) -> PPOState:
    """What PPO's acting reads: the network's parameters and gSDE's matrices (the optimizer state left out)."""
    return state.replace(policy=state.policy.replace(opt_state=None), key=None, step=None, n_updates=None)


def ppo_acting(discrete: bool, sde_sample_freq: int | None) -> Acting:
    """Acting in a Discrete or Box space; with gSDE (`sde_sample_freq` set) from the held matrices, redrawn
    at every rollout's start and every sde_sample_freq vector steps into it when that is positive (SB3)."""

    def as_env_action(action: jax.Array) -> jax.Array:
        """A Discrete index as the loop's one float column; a Box action as it is."""
        return action.astype(jnp.float32)[:, None] if discrete else action

    def explore(
        state: PPOState, obs: jax.Array, key: jax.Array, episode_start: jax.Array, progress_remaining: jax.Array
    ) -> tuple[jax.Array, Exploration | None, jax.Array]:
        key, draw = jax.random.split(key)
        distribution, _ = state.policy.apply_fn({"params": state.policy.params}, obs)
        if state.exploration is not None:  # gSDE: the env's held matrix, no fresh draw
            return distribution.explore(state.exploration.matrices), state.exploration, key
        return as_env_action(distribution.sample(draw)), state.exploration, key

    def sample(state: PPOState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key, draw = jax.random.split(key)
        distribution, _ = state.policy.apply_fn({"params": state.policy.params}, obs)
        action = distribution.sample(draw)
        return (as_env_action(action) if discrete else jnp.clip(action, -1.0, 1.0)), key

    def evaluate(state: PPOState, obs: jax.Array) -> jax.Array:
        distribution, _ = state.policy.apply_fn({"params": state.policy.params}, obs)
        mode = distribution.mode()
        return as_env_action(mode) if discrete else jnp.clip(mode, -1.0, 1.0)

    if sde_sample_freq is None:
        return Acting(explore=explore, sample=sample, evaluate=evaluate, random_warmup=False, policy_part=policy_part)

    return Acting(
        explore=explore,
        sample=sample,
        evaluate=evaluate,
        random_warmup=False,
        policy_part=policy_part,
        resample_due=lambda vector_steps_in_rollout: resample_due(vector_steps_in_rollout, sde_sample_freq),
        resample=resample_exploration,
    )


def activation_bytes(cfg: PPOConfig, spec: EnvSpec) -> int:
    """An upper estimate of one update's temporaries: the rollout's arrays and its flattened, permuted copies
    (x 4), and each minibatch step's activations and their gradients (x 3) for both networks."""
    rollout = cfg.n_steps * cfg.rollout_envs
    per_sample = 2 * spec.obs_dim * spec.obs_dtype().itemsize // 4 + spec.action_dim + 8  # in float32 values
    features = features_units(cfg.network.features, spec.image_shape)
    widths = sum(cfg.network.pi) + sum(cfg.network.vf) + spec.obs_dim + features + max(spec.action_dim, spec.n_actions)
    batch = minibatch_size(cfg, rollout)
    return 4 * (4 * rollout * per_sample + 3 * batch * widths)
