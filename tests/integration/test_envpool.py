"""EnvPool envs in the host loop (issue 46): the same-step resets against EnvPool's own next-step resets, the
transitions a run stores, gymnasium's env of the same id in lockstep, the run's files, resume, bad input."""

import json
import re
import signal
import subprocess
import sys

import envpool
import gymnasium as gym
import jax
import numpy as np
import pytest

from rlbench.bench.speed import main as speed_main
from rlbench.buffers.uniform import unpack
from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import EXIT_INTERRUPTED, main
from rlbench.config.entry import RunConfig
from rlbench.config.hyperparams import select_entry
from rlbench.config.registry import ALGORITHMS
from rlbench.envs.envpool_vector import EnvPoolVectorEnv, check_pool_memory
from rlbench.errors import ConfigError
from rlbench.loggers.base import MultiLogger
from rlbench.loop.run_state import SeedOutput
from rlbench.loop.runner import train_seeds
from rlbench.store.checkpoint import read_checkpoint
from rlbench.types import EnvSpec
from tests.conftest import REPO_ROOT, TINY_LEARNER, tiny_sac_config
from tests.integration.test_enjoy import read_video
from tests.integration.test_resume import wait_for
from tests.loop_runs import train

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered.*")  # EnvPool's float64 Pendulum bounds


def next_step_transitions(task, seed, actions, kwargs):
    """One env's transitions as EnvPool itself gives them (a pool of one, next-step reset), the reset steps
    dropped: [(obs, action, reward, next_obs, terminated, truncated)], and the observation after the last."""
    pool = envpool.make_gymnasium(task, num_envs=1, seed=[seed], **kwargs)
    obs, _ = pool.reset()
    rows = []
    for action in actions:
        next_obs, reward, terminated, truncated, _ = pool.step(action[None])
        rows.append((obs[0], action, reward[0], next_obs[0], terminated[0], truncated[0]))
        obs = next_obs
        if terminated[0] or truncated[0]:
            obs, reward, *_ = pool.step(np.zeros_like(action)[None])  # EnvPool's reset step
            assert reward[0] == 0.0
    return rows, obs[0]


def test_the_pool_steps_as_envpool_without_its_reset_steps():
    """Same-step mode: each env's (obs, reward, ends, final observation) are EnvPool's own env's, one env per
    pool, with the reset steps it inserts after each end left out; a rescaled action is 2x (bounds [-2, 2])."""
    kwargs, n_envs, steps = {"max_episode_steps": 5}, 3, 17
    env = EnvPoolVectorEnv("envpool:Pendulum-v1", n_envs, kwargs)
    obs, _ = env.reset(seed=[11, 12, 13])
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, n_envs, 1)).astype(np.float32)
    got = []
    for action in actions:
        next_obs, reward, terminated, truncated, infos = env.step(action)
        real_next = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            real_next[i] = infos["final_obs"][i]
        got.append((obs, reward, real_next, terminated, truncated))
        obs = next_obs
    for i in range(n_envs):
        rows, last_obs = next_step_transitions("Pendulum-v1", 11 + i, 2 * actions[:, i], kwargs)
        for t, (obs_t, _, reward, next_obs, terminated, truncated) in enumerate(rows):
            np.testing.assert_array_equal(got[t][0][i], obs_t)
            assert got[t][1][i] == np.float32(reward)
            np.testing.assert_array_equal(got[t][2][i], next_obs)
            assert (got[t][3][i], got[t][4][i]) == (terminated, truncated)
        np.testing.assert_array_equal(obs[i], last_obs)
    assert sum(g[4].sum() for g in got) == n_envs * (steps // 5)  # truncations at steps 5, 10, 15


def test_a_run_stores_exactly_the_real_transitions_and_monitors_whole_episodes(tmp_path):
    """The buffer of a run on EnvPool holds one row per env step, each EnvPool's own transition (no reset step,
    none across an episode's end: a truncated row's next_obs is the true final observation), and its
    Monitor file one line per whole episode."""
    run = RunConfig(
        env_id="envpool:Pendulum-v1", n_timesteps=40, n_envs=2, env_kwargs={"max_episode_steps": 7}, seed=5,
        eval_freq=-1, verbose=0,
    )  # fmt: skip
    result = train(run, ALGORITHMS["sac"], tiny_sac_config(learning_starts=1000), lambda names: MultiLogger([]))
    rows = result.buffer_state.rows[: int(result.buffer_state.size)]
    data = jax.tree.map(np.asarray, unpack(rows, EnvSpec(3, 1)))
    assert len(data.obs) == 40
    for i in range(2):  # rows are vector step after vector step, env after env
        mine = slice(i, None, 2)
        expected, _ = next_step_transitions("Pendulum-v1", 5 + i, 2 * data.action[mine], {"max_episode_steps": 7})
        np.testing.assert_array_equal(data.obs[mine], np.stack([r[0] for r in expected]))
        np.testing.assert_array_equal(data.reward[mine], np.array([r[2] for r in expected], np.float32))
        np.testing.assert_array_equal(data.next_obs[mine], np.stack([r[3] for r in expected]))
    assert data.terminated.sum() == 0  # Pendulum only truncates


def test_rescaled_actions_and_spaces_are_gymnasiums():
    env = EnvPoolVectorEnv("envpool:Pendulum-v1", 1, {})
    assert env.single_action_space == gym.spaces.Box(-1, 1, (1,), np.float32)
    assert env.original_action_space == gym.spaces.Box(-2, 2, (1,), np.float32)
    wrapped = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))
    for action in np.linspace(-1, 1, 9, dtype=np.float32):
        np.testing.assert_array_equal(env._pool_actions(np.array([[action]])), [wrapped.action(np.array([action]))])
    discrete = EnvPoolVectorEnv("envpool:CartPole-v1", 2, {})
    assert discrete.single_action_space == gym.spaces.Box(0, 1, (1,), np.int64)
    np.testing.assert_array_equal(discrete._pool_actions(np.array([[1.0], [0.0]], np.float32)), [1, 0])
    with pytest.raises(ValueError, match=r"action index 2.0 is not one of Discrete\(2\)"):
        discrete._pool_actions(np.array([[1.0], [2.0]], np.float32))


def pendulum_state(env, obs):
    env.unwrapped.state = np.array([np.arctan2(obs[1], obs[0]), obs[2]], np.float64)


def hopper_state(env, obs):
    env.unwrapped.set_state(np.concatenate([[0.0], obs[:5]]), obs[5:11])  # x: observed by no dynamics


@pytest.mark.parametrize(
    "task,set_state,tolerance,reward_tolerance",
    [("Pendulum-v1", pendulum_state, 1e-5, 1e-4), ("Hopper-v4", hopper_state, 1e-12, 1e-6)],
)
def test_envpool_steps_as_gymnasium_from_the_same_state(task, set_state, tolerance, reward_tolerance):
    """Same state, same actions: the same observations, rewards and episode end (Pendulum's state is read
        back from float32 observations, hence its tolerance; Hopper's reward is x's velocity from positions that
    differ by EnvPool's initial x; benchmarks/envpool_vs_gymnasium.py measures more)."""
    pool, env = EnvPoolVectorEnv("envpool:" + task, 1, {}), gym.make(task)
    obs, _ = pool.reset(seed=3)
    env.reset(seed=3)
    set_state(env, obs[0])
    rng = np.random.default_rng(0)
    wrapped = gym.wrappers.RescaleAction(env, np.float32(-1), np.float32(1))
    for step in range(1, 1001):
        action = rng.uniform(-1, 1, (1, *pool.single_action_space.shape)).astype(np.float32)
        obs, reward, terminated, truncated, infos = pool.step(action)
        gym_obs, gym_reward, gym_terminated, gym_truncated, _ = wrapped.step(action[0])
        final = infos["final_obs"][0] if terminated[0] or truncated[0] else obs[0]
        np.testing.assert_allclose(final, gym_obs, rtol=0, atol=tolerance)
        assert reward[0] == pytest.approx(gym_reward, abs=reward_tolerance)
        assert (terminated[0], truncated[0]) == (gym_terminated, gym_truncated), step
        if gym_terminated or gym_truncated:
            break
    assert step == 200 if task == "Pendulum-v1" else step < 1000  # a random Hopper falls


def test_entries_of_gymnasium_ids_apply_to_envpool_ids():
    table = {"Pendulum-v1": {"gamma": 0.9}, "envpool:Hopper-v4": {"gamma": 0.8}, "Hopper-v4": {}, "default": {}}
    assert select_entry(table, "envpool:Pendulum-v1", "f.yml", verbose=0) == {"gamma": 0.9}
    assert select_entry(table, "envpool:Hopper-v4", "f.yml", verbose=0) == {"gamma": 0.8}  # its own wins
    assert select_entry(table, "envpool:CartPole-v1", "f.yml", verbose=0) == {}  # default


def run_cli(tmp_path, *argv):
    return main(["-f", str(tmp_path / "logs"), "--verbose", "0", *argv])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--env", "envpool:HalfCheeta-v4"], r"EnvPool 1.2.5 has no env 'HalfCheeta-v4'; did you mean envpool:HalfC"),
        (["--env", "HopperBulletEnv-v0", "--vec-env", "envpool"], r"'envpool:HopperBulletEnv-v0': EnvPool .* has no"),
        (["--env", "envpool:Pendulum-v1", "--env-kwargs", "max_steps:5"], r"has no kwarg 'max_steps'; valid: .*max_e"),
        (["--env", "envpool:Pendulum-v1", "--env-kwargs", "num_envs:5"], r"num_envs is set by rlbench"),
        (["--env", "envpool:Pendulum-v1", "--env-kwargs", "max_episode_steps:0"], r"must be a positive integer"),
        (["--env", "envpool:Hopper-v4", "--env-kwargs", "healthy_z_min:'x'"], r"fails with .*TypeError: __init__"),
        (["--env", "envpool:Pendulum-v1", "--vec-env", "subproc"], r"steps in EnvPool's own threads"),
        (
            ["--env", "envpool:Pendulum-v1", "-params", "env_wrapper:gymnasium.wrappers.TimeAwareObservation"],
            r"env_wrapper: envpool:Pendulum-v1 steps in EnvPool's C\+\+ threads",
        ),
    ],
)
def test_bad_envpool_input_exits_2_before_writing(tmp_path, capsys, argv, message):
    assert run_cli(tmp_path, "--algo", "sac", *argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and re.search(message, err), out + err
    assert not (tmp_path / "logs").exists()


def test_more_envs_than_fit_are_refused_from_a_measured_pool():
    each = r"envpool:HalfCheetah-v4: 1000 envs need about \d\.\d GiB \(\d\.\d\d MiB each, measured\), but only 0\.0 GiB"
    with pytest.raises(ConfigError, match=each):
        check_pool_memory("envpool:HalfCheetah-v4", {}, 1000, available=2**20)
    check_pool_memory("envpool:HalfCheetah-v4", {}, 1000, available=2**32)
    check_pool_memory("envpool:HalfCheetah-v4", {}, 64, available=2**20)  # few envs: not measured


def test_without_envpool_installed_the_install_command_is_the_error(tmp_path):
    code = "import sys; sys.modules['envpool'] = None; from rlbench.cli.train import main; sys.exit(main(sys.argv[1:]))"
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "-f", str(tmp_path / "logs")]
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith('needs EnvPool, which is not installed: pip install -e ".[envpool]"')


def test_vec_env_envpool_trains_a_gymnasium_id_on_a_pool_and_evaluates_on_its_own(tmp_path):
    argv = ["--algo", "sac", "--env", "Pendulum-v1", "--vec-env", "envpool", "-n", "120", "--eval-freq", "60"]
    params = ["-params", *TINY_LEARNER, "n_envs:2"]
    assert run_cli(tmp_path, *argv, "--eval-episodes", "2", "--env-kwargs", "max_episode_steps:20", *params) == 0
    run_dir = tmp_path / "logs" / "sac" / "Pendulum-v1_1"
    lengths = np.load(run_dir / "evaluations.npz")["ep_lengths"]
    np.testing.assert_array_equal(lengths, np.full((2, 2), 20))  # EnvPool's kwarg: gymnasium's Pendulum has none
    monitor = (run_dir / "0.monitor.csv").read_text().splitlines()[2:]
    assert [line.split(",")[1] for line in monitor] == ["20"] * 3  # 60 steps of env 0: three whole episodes


def sigterm_then_resume(tmp_path, argv, folder):
    """train.py with `argv` stopped by a real SIGTERM after its third checkpoint (exit 75), then -i from its latest
    checkpoint for 120 more steps (exit 0): (that checkpoint's path, the resumed process)."""
    log = tmp_path / "stopped.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "-f", str(tmp_path / "logs"), *argv, "-n", "1000000"],
            cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        run_dir = tmp_path / "logs" / "sac" / f"{folder}_1"
        wait_for(log, lambda: len(list(run_dir.glob("rl_model_*_steps.zip"))) >= 3 or proc.poll() is not None)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == EXIT_INTERRUPTED, log.read_text()[-2000:]
    stopped = max(run_dir.glob("rl_model_*_steps.zip"), key=lambda p: read_checkpoint(p).manifest.counters.env_steps)
    done = subprocess.run(
        [sys.executable, "train.py", "-f", str(tmp_path / "logs"), *argv, "-n", "120", "-i", str(stopped)],  # -n: more
        cwd=REPO_ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return stopped, done


def test_sigterm_then_resume_starts_new_episodes_and_finishes(tmp_path):
    """EnvPool keeps no episode record: -i restarts each env's episode from a new seed (not bit-exact, as the
    README says), the interrupted episodes reach no Monitor file, and the run finishes."""
    # Episodes of 64 steps: a checkpoint every 100 steps falls mid-episode up to 1,600 steps.
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "--env-kwargs", "max_episode_steps:64", "--seed", "2"]
    argv += ["--eval-freq", "-1", "--save-freq", "100", "-params", *TINY_LEARNER]
    stopped, done = sigterm_then_resume(tmp_path, argv, "envpool_Pendulum-v1")
    assert read_checkpoint(stopped).manifest.counters.env_steps % 64  # stopped mid-episode
    assert "start new episodes" in done.stdout
    resumed = tmp_path / "logs" / "sac" / "envpool_Pendulum-v1_2"
    lengths = [line.split(",")[1] for line in (resumed / "0.monitor.csv").read_text().splitlines()[2:]]
    assert lengths == ["64"]  # 120 steps after the resume: one whole episode, none cut by the stop


@pytest.fixture(scope="module")
def envpool_logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs")
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "-n", "100", "--env-kwargs", "max_episode_steps:20"]
    assert main(["-f", str(folder), "--verbose", "0", *argv, "--eval-freq", "-1", "-params", *TINY_LEARNER]) == 0
    return folder


def test_enjoy_plays_on_envpool(envpool_logs, capsys):
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "-f", str(envpool_logs), "-n", "45", "--no-render"]
    assert enjoy(argv) == 0
    out = capsys.readouterr().out
    assert re.findall(r"Episode \d \(env 0\): return -?[\d.]+, length (\d+)", out) == ["20", "20"]  # EnvPool's kwarg


def test_enjoy_records_with_gymnasiums_env_of_the_same_id(envpool_logs, tmp_path, capsys):
    video = tmp_path / "agent.mp4"
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "-f", str(envpool_logs), "-n", "12"]
    assert enjoy([*argv, "--record", str(video)]) == 0
    assert "envpool:Pendulum-v1 draws no frames here: playing gymnasium's Pendulum-v1" in capsys.readouterr().err
    assert len(read_video(video)) == 12
    argv[3] = "envpool:CheetahRun-v1"  # DeepMind Control: gymnasium has no such id
    assert enjoy([*argv, "--record", str(video)]) == 2
    assert re.fullmatch(
        r"error: envpool:CheetahRun-v1 cannot be rendered: .* has no CheetahRun-v1; .*\n", capsys.readouterr().err
    )


ENV_ECHO_PEER = """
import json, sys
args = sys.argv[1:]
print(json.dumps({"system": "stand-in", "env": args[args.index("--env") + 1]}))
"""


def test_bench_speed_measures_envpool_beside_gymnasiums_env_and_the_peer_on_gymnasiums(tmp_path):
    """`bench speed --env envpool:X`: rlbench's rows on EnvPool (the host loop, then the device loop through its XLA
    interface), its row on gymnasium's X, the peer's on X (RL Zoo makes gymnasium's envs)."""
    peer = tmp_path / "peer.py"
    peer.write_text(ENV_ECHO_PEER)
    output = tmp_path / "rows.jsonl"
    # 1,000 steps: the device loop's row times whole chunks (of 1,000 vector steps at one env)
    args = ["--env", "envpool:Pendulum-v1", "--case", "sac", "1", "1", "1000", "--qf", "16", "--device", "cpu"]
    args += ["--peer", sys.executable, "--peer-script", str(peer), "--output", str(output), "--update-seconds", "0.2"]
    assert speed_main(args) == 0
    _, envpool_row, xla_row, gymnasium_row, peer_row = [json.loads(line) for line in output.read_text().splitlines()]
    assert (envpool_row["env"], xla_row["env"], gymnasium_row["env"]) == ("envpool:Pendulum-v1",) * 2 + ("Pendulum-v1",)
    assert (envpool_row["loop"], xla_row["loop"], xla_row["vec_env"], gymnasium_row["loop"]) == (
        "host", "device", "envpool-xla", "host"
    )  # fmt: skip
    assert min(row["env_steps_per_s"] for row in (envpool_row, xla_row, gymnasium_row)) > 0
    assert peer_row == {"system": "stand-in", "env": "Pendulum-v1", "device": "cpu"}


def test_the_peer_trains_gymnasiums_env_of_an_envpool_id(tmp_path):
    from rlbench.bench import peer as sbx
    from rlbench.run.request import RunRequest
    from rlbench.sweep.grid import SweepSpec

    spec = SweepSpec(name="returns", algos=("sac",), envs=("envpool:Pendulum-v1",), seeds=(1,), n_timesteps=400,
                     eval_freq=200, eval_episodes=1)  # fmt: skip
    (cell,) = sbx.plan_cells(spec, RunRequest(n_timesteps=400, vec_env="envpool"), tmp_path / "sweep")
    argv = sbx.command(cell, sbx.Peer(sys.executable, "a stand-in"), spec, None)
    assert argv[argv.index("--env") + 1] == "Pendulum-v1" and argv[argv.index("--vec-env") + 1] == "dummy"
    assert sbx.run_folder(cell).name == "Pendulum-v1_1"


def test_each_seed_of_one_pool_collects_as_a_single_run_with_that_seed():
    """--n-seeds 3 on EnvPool: one pool of 3 x 2 envs, env j of seed s seeded s + j; each seed's warm-up
    transitions (episode ends included: 7-step episodes) are bit for bit a single run's with that seed."""
    cfg = tiny_sac_config(learning_starts=100, buffer_size=128)
    run = RunConfig(env_id="envpool:Pendulum-v1", n_timesteps=40, n_envs=2, env_kwargs={"max_episode_steps": 7},
                    eval_freq=-1, verbose=0, seed=7)  # fmt: skip
    group = train_seeds(run, ALGORITHMS["sac"], cfg, [SeedOutput(lambda names: MultiLogger([])) for _ in range(3)])
    for index in range(3):
        single = train(RunConfig(**{**vars(run), "seed": 7 + index}), ALGORITHMS["sac"], cfg, lambda n: MultiLogger([]))
        np.testing.assert_array_equal(np.asarray(group.buffer_state.rows[index]), np.asarray(single.buffer_state.rows))
    assert not np.array_equal(np.asarray(group.buffer_state.rows[0]), np.asarray(group.buffer_state.rows[1]))


def test_ppo_on_a_discrete_envpool_env_monitors_whole_episodes_without_reset_steps(tmp_path):
    """CartPole pays 1 per step; EnvPool's reset step pays 0. Every Monitor line of a PPO run has return ==
    length (no reset step counted), at most the 10-step limit, and one env's episodes add up to its steps."""
    argv = ["--algo", "ppo", "--env", "envpool:CartPole-v1", "-n", "256", "--env-kwargs", "max_episode_steps:10"]
    assert run_cli(tmp_path, *argv, "--eval-freq", "-1", "-params", "n_envs:2", "n_steps:32", "batch_size:32") == 0
    lines = (tmp_path / "logs" / "ppo" / "envpool_CartPole-v1_1" / "0.monitor.csv").read_text().splitlines()[2:]
    episodes = [(float(r), int(n)) for r, n, _ in (line.split(",") for line in lines)]
    assert all(r == n <= 10 for r, n in episodes) and 128 - 10 < sum(n for _, n in episodes) <= 128


def test_optuna_tunes_on_an_envpool_id_into_a_real_storage(tmp_path):
    import optuna

    from rlbench.tuning.study import make_storage

    storage = str(tmp_path / "tune.log")
    argv = ["--algo", "sac", "--env", "envpool:Pendulum-v1", "-optimize", "--n-trials", "2", "-n", "200"]
    argv += ["--n-evaluations", "1", "--eval-episodes", "1", "--env-kwargs", "max_episode_steps:50"]
    assert run_cli(tmp_path, *argv, "--storage", storage, "-params", *TINY_LEARNER) == 0
    study = optuna.load_study(storage=make_storage(storage), study_name="sac_envpool_Pendulum-v1")
    finished = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) == 2 and all(np.isfinite(t.value) and t.value < 0 for t in finished)
