"""`normalize` end to end (issue 18 item 3): the statistics a run saves are those of what it collected, in
every checkpoint and beside the final model; a resume continues them bit for bit; each seed keeps its own;
enjoy.py acts on them (and scales rewards with --norm-reward); forged or missing statistics are refused
(RELIABILITY B10, J)."""

import hashlib
import io
import shutil
import zipfile

import numpy as np
import pytest

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train
from rlbench.run.policy import load_policy
from rlbench.store.checkpoint import read_checkpoint
from tests.integration.test_checkpoint_untrusted import forge
from tests.unit.test_normalization import prior_weighted_moments

GAMMA = 0.98  # the entry's gamma, which RL Zoo gives the return statistics too
TINY = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "--seed",
    "5",
    "--verbose",
    "0",
    "-params",
    "learning_starts:100",
    "batch_size:8",
    "buffer_size:1000",
    "policy_kwargs:dict(net_arch=[16])",
    f"gamma:{GAMMA}",
    "normalize:dict(norm_obs=True, norm_reward=True, gamma=0.5)",
]
STATS = ("obs_mean", "obs_var", "obs_count", "ret_mean", "ret_var", "ret_count")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """A 300-step run (one episode end, at 200) with periodic checkpoints and its replay buffer."""
    folder = tmp_path_factory.mktemp("logs")
    argv = ["-f", str(folder), *TINY, "-n", "300", "--eval-freq", "150", "--eval-episodes", "1"]
    assert train([*argv, "--save-freq", "150", "--save-replay-buffer"]) == 0
    return folder


def run_folder(logs, n=1):
    return logs / "sac" / f"Pendulum-v1_{n}"


def stats_of(path):
    return read_checkpoint(path).group("normalize")


def state_hash(path):
    return hashlib.sha256(zipfile.ZipFile(path).read("state.msgpack")).hexdigest()


def test_saved_statistics_are_those_of_the_collected_observations_and_returns(logs):
    """Recomputed in numpy from the replay buffer (every observation acted on, in order) and the last
    observation: the checkpoint's statistics, and vecnormalize.npz beside the final model holds the same."""
    final = read_checkpoint(run_folder(logs) / "Pendulum-v1.zip")
    rows = final.group("replay_buffer")["rows"]  # [300, obs | next_obs | action | reward | terminated]
    saved = final.group("normalize")
    observations = np.concatenate([rows[:, :3], final.group("host")["obs"]])  # the first reset's included
    mean, var = prior_weighted_moments(observations)
    np.testing.assert_allclose(saved["obs_mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(saved["obs_var"], var, rtol=1e-12)
    returns, discounted = [], 0.0
    for step, reward in enumerate(rows[:, 7].astype(np.float64)):
        discounted = discounted * GAMMA + reward
        returns.append(discounted)
        if step == 199:  # Pendulum's time limit
            discounted = 0.0
    mean, var = prior_weighted_moments(np.array(returns))
    # The buffer holds the rewards as float32, the statistics were built from the env's float64.
    np.testing.assert_allclose([saved["ret_mean"], saved["ret_var"]], [mean, var], rtol=1e-6)
    np.testing.assert_allclose(saved["returns"], [discounted], rtol=1e-6)

    beside = np.load(run_folder(logs) / "Pendulum-v1" / "vecnormalize.npz")
    for name in STATS:
        np.testing.assert_array_equal(beside[name], saved[name])
    assert float(beside["gamma"]) == GAMMA and bool(beside["norm_reward"]) and float(beside["clip_obs"]) == 10.0
    assert stats_of(run_folder(logs) / "rl_model_150_steps.zip")["obs_count"] == pytest.approx(151 + 1e-4)


def test_the_policy_acts_on_normalised_observations(logs):
    policy = load_policy(read_checkpoint(run_folder(logs) / "Pendulum-v1.zip"))
    obs = read_checkpoint(run_folder(logs) / "Pendulum-v1.zip").group("replay_buffer")["rows"][::30, :3]
    stats = policy.stats
    normalised = np.clip((obs - stats.obs.mean[0]) / np.sqrt(stats.obs.var[0] + 1e-8), -10, 10).astype(np.float32)
    act = policy._act_deterministic  # the same compiled acting, given no statistics
    np.testing.assert_allclose(policy(obs), act(policy.state, normalised, None), rtol=1e-5, atol=1e-6)
    assert not np.allclose(policy(obs), act(policy.state, obs, None), atol=1e-3)


def play(logs, capsys, *argv):
    code = enjoy(["--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), "--no-render", "-n", "200", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_enjoy_norm_reward_shows_rewards_scaled_by_the_saved_return_statistics(logs, capsys, tmp_path):
    code, out, _ = play(logs, capsys)
    assert code == 0
    raw = float(out.split("Mean reward: ")[1].split()[0])
    code, out, _ = play(logs, capsys, "--norm-reward", "--reward-log", str(tmp_path))
    assert code == 0
    scaled = float(out.split("Mean reward: ")[1].split()[0])
    ret_var = stats_of(run_folder(logs) / "Pendulum-v1.zip")["ret_var"]
    assert scaled == pytest.approx(raw / np.sqrt(ret_var + 1e-8), abs=0.01)  # no reward reaches the clip at 10
    monitor = (tmp_path / "0.monitor.csv").read_text().splitlines()
    assert float(monitor[2].split(",")[0]) == pytest.approx(raw, abs=0.01)  # the Monitor file keeps the env's


def forged_copy(logs, tmp_path, name, replace):
    """The run folder copied, with the final model's normalize members replaced (None deletes)."""
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    model = run_folder(copy) / "Pendulum-v1.zip"
    forge(run_folder(logs) / "Pendulum-v1.zip", model, {f"normalize/{name}.npy": replace})
    return copy, model


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "name,value,reason",
    [
        ("obs_var", np.array([1.0, np.nan, 1.0]), "normalize/obs_var.npy holds NaN or inf"),
        ("ret_var", np.array(-4.0), "normalize/ret_var.npy holds a negative variance"),
        ("obs_mean", np.zeros(5), r"normalize/obs_mean.npy holds float64[5], expected float64[3]"),
        ("obs_count", np.array(3, np.int64), r"normalize/obs_count.npy holds int64[], expected float64[]"),
    ],
)
def test_enjoy_refuses_forged_statistics_in_one_line(logs, capsys, tmp_path, name, value, reason):
    copy, model = forged_copy(logs, tmp_path, name, npy(value))
    code, _, err = play(copy, capsys)
    assert code == 2 and err == f"error: {model}: {reason}\n"


def test_enjoy_without_the_statistics_exits_1_naming_them(logs, capsys, tmp_path):
    """B10: a model trained with normalize whose statistics are gone does not act on raw observations."""
    copy, model = forged_copy(logs, tmp_path, "obs_mean", None)
    code, _, err = play(copy, capsys)
    assert code == 1 and "missing normalization stats: no normalize/obs_mean.npy" in err and str(model) in err


def test_resume_refuses_forged_statistics_before_any_run_folder(logs, capsys, tmp_path):
    checkpoint = tmp_path / "rl_model_150_steps.zip"
    forge(run_folder(logs) / "rl_model_150_steps.zip", checkpoint, {"normalize/ret_count.npy": npy(np.array(0.0))})
    assert train(["-f", str(tmp_path / "new"), *TINY[:8], "-i", str(checkpoint)]) == 2
    err = capsys.readouterr().err
    assert "normalize/ret_count.npy holds 0.0, below the initial count" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "new").exists()
    assert train(["-f", str(tmp_path / "new"), *TINY[:8], "-i", str(checkpoint), "-params", "normalize:False"]) == 2
    assert "normalize cannot change on resume" in capsys.readouterr().err


def test_resume_continues_the_statistics_bit_identically(tmp_path):
    """I6 with normalize: 2 envs, train_freq 3, a checkpoint between training iterations with episodes
    mid-way; the resumed run ends with the parameters and statistics of the run that never stopped."""
    argv = [*TINY, "n_envs:2", "train_freq:3", "-n", "600", "--eval-freq", "-1"]
    assert train(["-f", str(tmp_path / "a"), *argv, "--save-freq", "250", "--save-replay-buffer"]) == 0
    first = run_folder(tmp_path / "a")
    assert train(["-f", str(tmp_path / "a"), *TINY[:8], "-i", str(first / "rl_model_250_steps.zip")]) == 0
    resumed = run_folder(tmp_path / "a", 2)
    assert state_hash(resumed / "Pendulum-v1.zip") == state_hash(first / "Pendulum-v1.zip")
    for name, value in stats_of(first / "Pendulum-v1.zip").items():
        np.testing.assert_array_equal(stats_of(resumed / "Pendulum-v1.zip")[name], value)


def test_each_seed_has_its_own_statistics(tmp_path):
    """Two seeds in one process: seed 6's statistics are those of a run of seed 6 alone (random actions
    until learning_starts, so both see the same observations), and differ from seed 5's."""
    argv = [*TINY, "-n", "100", "--eval-freq", "-1"]
    assert train(["-f", str(tmp_path / "both"), *argv, "--n-seeds", "2"]) == 0
    assert train(["-f", str(tmp_path / "alone"), *argv[:5], "6", *argv[6:]]) == 0
    alone = stats_of(run_folder(tmp_path / "alone") / "Pendulum-v1.zip")
    seeds = [stats_of(run_folder(tmp_path / "both", n) / "Pendulum-v1.zip") for n in (1, 2)]
    for name in STATS:
        np.testing.assert_array_equal(seeds[1][name], alone[name])
    assert not np.array_equal(seeds[0]["obs_mean"], seeds[1]["obs_mean"])


def critic_loss_after_one_episode(log_folder, normalize):
    argv = [*TINY[:-1], normalize, "-f", str(log_folder), "-n", "200", "--eval-freq", "-1", "--log-interval", "1"]
    assert train(argv) == 0
    rows = (run_folder(log_folder) / "progress.csv").read_text().splitlines()
    header, last = rows[0].split(","), rows[-1].split(",")
    return float(last[header.index("train/critic_loss")])


def test_the_critic_learns_from_the_normalised_rewards(tmp_path):
    """The runner hands the statistics to the update: rewards clipped to +-1e-3 leave the critic almost
    nothing to fit, where Pendulum's own (about -6 per step) give a squared TD error in the tens."""
    clipped = critic_loss_after_one_episode(tmp_path / "a", "normalize:dict(norm_obs=False, clip_reward=1e-3)")
    raw = critic_loss_after_one_episode(tmp_path / "b", "normalize:dict(norm_obs=False, norm_reward=False)")
    assert clipped < 2.0 < 10.0 < raw
