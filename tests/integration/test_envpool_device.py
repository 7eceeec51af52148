"""EnvPool in the device loop (`--vec-env envpool-xla`, issue 46): it computes what the host loop computes on
the same pools, its reset steps reach no buffer, episode record or evaluation, its seeds start as their single
runs, a SIGTERM resumes, and what it cannot do is refused."""

import re

import envpool
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.td3.config import TD3Config
from rlbench.buffers.uniform import make_uniform_buffer, unpack
from rlbench.cli.train import main
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.loggers.base import MultiLogger
from rlbench.loop.device.runner import train_seeds_on_device
from rlbench.loop.run_state import SeedOutput
from rlbench.store.checkpoint import read_checkpoint
from rlbench.types import EnvSpec, Transition
from tests.conftest import TINY_LEARNER, ppo_config, tiny_config, tiny_sac_config
from tests.integration.test_envpool import sigterm_then_resume
from tests.loop_runs import train
from tests.variants import slow_variant

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered.*")  # EnvPool's float64 Pendulum bounds

NO_LOG = lambda names: MultiLogger([])  # noqa: E731
HOPPER = EnvSpec(11, 3)


def config(algo, **overrides):
    common = dict(learning_starts=0, train_freq=2, gradient_steps=2, buffer_size=1000, **overrides)
    return tiny_config(TD3Config, **common) if algo == "td3" else tiny_sac_config(**common)


def rows(result, index=None):
    state = result.buffer_state
    size = int(np.asarray(state.size).reshape(-1)[0 if index is None else index])
    table = state.rows if index is None else state.rows[index]
    return np.asarray(table[:size])


def device_run(**settings):
    return RunConfig(**{"eval_freq": -1, "verbose": 0, "vec_env": "envpool-xla", **settings})


@pytest.mark.parametrize(
    "algo,env_id,n_envs,kwargs",
    [
        ("sac", "envpool:Pendulum-v1", 2, {"max_episode_steps": 7}),  # the envs end together: reset at once
        slow_variant("td3", "envpool:Pendulum-v1", 2, {"max_episode_steps": 7}),
        slow_variant("td3", "envpool:Hopper-v4", 1, {}),  # terminations; a pool of one always resets at once
    ],
)
def test_the_device_loop_on_envpool_computes_what_the_host_loop_computes(algo, env_id, n_envs, kwargs):
    """The same learner and seed, the host loop on EnvPool's pool in same-step mode, the device loop on its XLA
    interface: every buffer row and the parameters equal, and the same episodes, where every env of a pool ends
    together (the device loop then takes the reset step inside the ending step)."""
    run = RunConfig(env_id=env_id, n_timesteps=80, n_envs=n_envs, env_kwargs=kwargs, seed=3, eval_freq=-1, verbose=0)
    cfg = config(algo)
    on_host = train(run, ALGORITHMS[algo], cfg, NO_LOG)
    on_device = train_seeds_on_device(RunConfig(**{**run.__dict__, "vec_env": "envpool-xla"}), ALGORITHMS[algo], cfg,
                                      [SeedOutput(NO_LOG)])  # fmt: skip
    assert on_device.env_steps == on_host.env_steps == 80
    np.testing.assert_allclose(rows(on_device), rows(on_host), rtol=1e-5, atol=1e-6)
    assert len(rows(on_device)) == 80
    for host_leaf, device_leaf in zip(
        jax.tree.leaves(on_host.state.actor.params), jax.tree.leaves(on_device.state.actor.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-4, atol=1e-6)
    host_episodes, device_episodes = on_host.host.seeds[0].episodes, on_device.host.seeds[0].episodes
    assert device_episodes.finished_lengths == host_episodes.finished_lengths
    assert len(host_episodes.finished_lengths) >= 2
    np.testing.assert_allclose(device_episodes.finished_returns, host_episodes.finished_returns, rtol=1e-5)


def replay_with_reset_steps(seeds, data, n_vector_steps):
    """EnvPool's own pool driven with a run's stored actions, taking its reset steps where the device loop takes
    them (with the next vector step; inside the ending step when every env ended): the transitions it makes in
    order, each (env, obs, action, reward, next_obs, terminated), and how many vector steps held a reset step."""
    pool = envpool.make_gymnasium("Hopper-v4", num_envs=len(seeds), batch_size=len(seeds), seed=list(seeds))
    obs, _ = pool.reset()
    resetting, row, made, partial = np.zeros(len(seeds), bool), 0, [], 0
    for _ in range(n_vector_steps):
        actions = np.zeros((len(seeds), 3))
        valid = np.flatnonzero(~resetting)
        actions[valid] = data.action[row : row + len(valid)]
        partial += resetting.any()
        next_obs, reward, terminated, truncated, _ = pool.step(actions)
        for i in valid:
            made.append((i, obs[i], actions[i], reward[i], next_obs[i], terminated[i]))
        row += len(valid)
        ended = (terminated | truncated) & ~resetting
        if ended.all():
            next_obs = pool.step(np.zeros_like(actions))[0]
        resetting = ended & ~ended.all()
        obs = next_obs
    return made, partial


def test_reset_steps_reach_no_buffer_row_and_no_episode_length():
    """Hopper with random actions ends its envs' episodes at different steps: the buffer holds exactly EnvPool's
    transitions in order (count and content, each row's next_obs the true final one at an end), the reset steps
    the device loop took are in none of them, and each episode's length counts its transitions only."""
    run = device_run(env_id="envpool:Hopper-v4", n_timesteps=400, n_envs=2, seed=11)
    result = train_seeds_on_device(run, ALGORITHMS["sac"], tiny_sac_config(learning_starts=10_000, buffer_size=1000),
                                   [SeedOutput(NO_LOG)])  # fmt: skip
    data = jax.tree.map(np.asarray, unpack(jnp.asarray(rows(result)), HOPPER))
    made, partial = replay_with_reset_steps([11, 12], data, 200)
    assert partial >= 3, "the run must cross episode ends of one env while the other runs on"
    assert len(data.obs) == len(made) < 400  # one row per transition; the reset steps are env steps of the run
    for row, (_, obs, action, reward, next_obs, terminated) in enumerate(made):
        np.testing.assert_array_equal(data.obs[row], obs.astype(np.float32))
        np.testing.assert_array_equal(data.action[row], action.astype(np.float32))
        assert data.reward[row] == np.float32(reward) and data.terminated[row] == float(terminated)
        np.testing.assert_array_equal(data.next_obs[row], next_obs.astype(np.float32))
    episodes = result.host.seeds[0].episodes
    ends, lengths = [], {0: 0, 1: 0}
    for env, *_, terminated in made:
        lengths[env] += 1
        if terminated:
            ends.append(lengths[env])
            lengths[env] = 0
    assert sorted(episodes.finished_lengths) == sorted(ends) and sum(ends) <= len(made)


def test_an_evaluation_on_envpool_s_device_loop_is_the_host_loop_s():
    """The first evaluation (4 Hopper episodes on 2 envs, ending at different steps: reset steps inside) counts
    the same returns and lengths as the host loop's evaluation on the same seeds and policy."""
    settings = dict(env_id="envpool:Hopper-v4", n_timesteps=40, n_envs=1, seed=4, verbose=0)
    evaluation = dict(eval_freq=40, eval_episodes=4, n_eval_envs=2)
    cfg = tiny_sac_config(learning_starts=10_000)
    on_host = train(RunConfig(**settings, **evaluation), ALGORITHMS["sac"], cfg, NO_LOG)
    run = RunConfig(**settings, **evaluation, vec_env="envpool-xla")
    on_device = train_seeds_on_device(run, ALGORITHMS["sac"], cfg, [SeedOutput(NO_LOG)])
    host_eval, device_eval = on_host.host.seeds[0].evaluations, on_device.host.seeds[0].evaluations
    assert device_eval.timesteps == host_eval.timesteps == [40]

    def episodes(evaluations):  # the host loop lists them as they end, the device loop env after env
        return sorted(zip(evaluations.ep_lengths[0].tolist(), evaluations.results[0].tolist(), strict=True))

    host_episodes, device_episodes = episodes(host_eval), episodes(device_eval)
    assert [n for n, _ in device_episodes] == [n for n, _ in host_episodes]
    assert len({n for n, _ in host_episodes}) > 1  # episodes of several lengths: reset steps fell mid-evaluation
    np.testing.assert_allclose([r for _, r in device_episodes], [r for _, r in host_episodes], rtol=1e-5)


@pytest.mark.parametrize(
    "algo,env_id,overrides",
    [
        ("ppo", "envpool:CartPole-v1", {}),  # Discrete actions, terminations at different steps in the two envs
        slow_variant("a2c", "envpool:Hopper-v4", {}),  # Box, float64 actions
        slow_variant(
            "ppo", "envpool:Pendulum-v1", {"use_sde": True, "sde_sample_freq": 4}
        ),  # samples beyond the bounds
    ],
)
def test_ppo_on_envpool_s_device_loop_computes_what_the_host_loop_computes(algo, env_id, overrides):
    """An on-policy learner's envs get a pool each, so no env takes a reset step of its own: every staged rollout
    row (obs, sampled action, reward, final obs, terminated, truncated), the parameters after five updates and
    the episodes equal the host loop's on EnvPool."""
    cfg = ppo_config(algo, **overrides)
    run = RunConfig(env_id=env_id, n_timesteps=5 * 32 + 16, n_envs=2, seed=4, eval_freq=-1, verbose=0)
    on_host = train(run, ALGORITHMS[algo], cfg, NO_LOG)
    on_device = train_seeds_on_device(RunConfig(**{**run.__dict__, "vec_env": "envpool-xla"}), ALGORITHMS[algo], cfg,
                                      [SeedOutput(NO_LOG)])  # fmt: skip
    host_rows, device_rows = on_host.host.pending, on_device.host.pending
    assert host_rows.count == device_rows.count == 16
    for name in ("obs", "action", "reward", "next_obs", "terminated", "truncated"):
        np.testing.assert_allclose(getattr(device_rows, name)[:, :16], getattr(host_rows, name)[:, :16], rtol=1e-5,
                                   atol=1e-6, err_msg=name)  # fmt: skip
    for host_leaf, device_leaf in zip(
        jax.tree.leaves(on_host.state.policy.params), jax.tree.leaves(on_device.state.policy.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-4, atol=1e-6)
    host_episodes, device_episodes = on_host.host.seeds[0].episodes, on_device.host.seeds[0].episodes
    assert device_episodes.finished_lengths == host_episodes.finished_lengths
    assert env_id.endswith("Pendulum-v1") or len(set(host_episodes.finished_lengths)) > 1


def test_k_seeds_on_their_own_pools_start_as_their_single_runs():
    """--n-seeds 2 on the device loop: one pool per seed, seed i's first transitions are its single run's."""
    run = device_run(env_id="envpool:Pendulum-v1", n_timesteps=20, n_envs=2, seed=5)
    cfg = config("sac")
    together = train_seeds_on_device(run, ALGORITHMS["sac"], cfg, [SeedOutput(NO_LOG)] * 2)
    for index in range(2):
        alone = train_seeds_on_device(RunConfig(**{**run.__dict__, "seed": 5 + index}), ALGORITHMS["sac"], cfg,
                                      [SeedOutput(NO_LOG)])  # fmt: skip
        np.testing.assert_allclose(rows(together, index), rows(alone), rtol=1e-5, atol=1e-6)


def test_a_buffer_insert_of_some_rows_is_the_insert_of_those_rows_alone():
    buffer = make_uniform_buffer(7, EnvSpec(1, 1))
    values = jnp.arange(1.0, 8.0)
    batch = Transition(values[:, None], values[:, None], values, values[:, None], jnp.zeros(7))
    valid = jnp.asarray([True, False, True, True, False, True, True])
    first_four = buffer.add_fn(buffer.init_fn(), jax.tree.map(lambda x: x[:4], batch))
    state = buffer.add_valid_fn(first_four, batch, valid)
    alone = buffer.add_fn(first_four, jax.tree.map(lambda x: x[np.asarray(valid)], batch))
    np.testing.assert_array_equal(state.rows, alone.rows)  # wrapped around the end: 4 + 5 rows in 7 slots
    assert (int(state.position), int(state.size)) == (int(alone.position), int(alone.size)) == (2, 7)
    np.testing.assert_array_equal(state.rows[:, 0], [6.0, 7.0, 3.0, 4.0, 1.0, 3.0, 4.0])


def run_cli(tmp_path, *argv):
    return main(["-f", str(tmp_path / "logs"), "--verbose", "0", *argv])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--algo", "sac", "--env", "envpool:Pendulum-v1", "--env-kwargs", "max_episode_steps:0"], r"positive"),
        (["--algo", "sac", "--env", "Pendulum-v1", "-params", "normalize:True"], r"normalize: not available on the"),
        (["--algo", "sac", "--env", "gymnax:Pendulum-v1"], r"JAX-native env, not EnvPool's; drop it"),
        (  # the AtariWrapper becomes an Atari pool's options (test_envpool_atari.py); no other wrapper can wrap a pool
            ["--algo", "sac", "--env", "envpool:Pendulum-v1", "-params", "env_wrapper:gymnasium.wrappers.ClipReward"],
            r"gymnasium wrappers cannot wrap; drop gymnasium.wrappers.ClipReward",
        ),
    ],
)
def test_what_envpool_s_device_loop_cannot_do_exits_2_before_writing(tmp_path, capsys, argv, message):
    assert run_cli(tmp_path, *argv, "--vec-env", "envpool-xla") == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and re.search(message, err), out + err
    assert not (tmp_path / "logs").exists()


def test_sigterm_on_envpool_s_device_loop_checkpoints_and_resumes_with_new_episodes(tmp_path):
    """A real SIGTERM: exit 75 with a checkpoint; -i from it starts new episodes (EnvPool's state cannot be saved:
    not bit-exact, as the README says), the learner continues from the checkpoint, and the run finishes."""
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "--vec-env", "envpool-xla", "--seed", "2"]
    argv += ["--env-kwargs", "max_episode_steps:50", "--eval-freq", "-1", "--save-freq", "100"]
    argv += ["-params", *TINY_LEARNER]
    stopped, done = sigterm_then_resume(tmp_path, argv, "envpool_Pendulum-v1")
    steps = read_checkpoint(stopped).manifest.counters.env_steps
    assert "cannot hold envpool:Pendulum-v1's envs (EnvPool): the envs start new episodes" in done.stdout
    resumed = tmp_path / "logs" / "sac" / "envpool_Pendulum-v1_2"
    assert read_checkpoint(resumed / "envpool_Pendulum-v1.zip").manifest.counters.env_steps == steps + 120
    lengths = [line.split(",")[1] for line in (resumed / "0.monitor.csv").read_text().splitlines()[2:]]
    assert lengths == ["50", "50"]  # 120 steps after the resume: two whole episodes, none cut by the stop
