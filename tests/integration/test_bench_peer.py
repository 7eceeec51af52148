"""`bench returns --peer PYTHON`: SBX trains the same grid through RL Zoo beside rlbench, with the same seeds,
env steps, evaluation schedule and (translated) hyperparameters, and the report shows both; a refused cell is
named; a --peer that is not a Python with sbx and rl_zoo3 exits 2 before anything is written.

The end-to-end test needs a peer venv (`RLBENCH_TEST_PEER=/path/to/python`); .ci/run builds one, so on CI
(CI=1) its absence fails the test instead of skipping it."""

import os
import re
import signal
import stat
import subprocess
import sys

import numpy as np
import pytest
import yaml

from rlbench.bench.__main__ import main as bench_main

pytestmark = pytest.mark.filterwarnings("ignore:.*InvertedPendulum-v4 is out of date:DeprecationWarning")

# 100 gradient steps of a tiny SAC for both systems; TQC's cells are refused for the peer (a target update
# interval SBX does not have) and learn nothing here (learning_starts above -n).
TINY = [
    *("-n", "400", "--eval-freq", "200", "--eval-episodes", "1"),
    *("-params", "learning_starts:300", "policy_kwargs:dict(net_arch=[8])", "batch_size:16", "buffer_size:1000"),
    *("--params-for", "tqc", "target_update_interval:2", "learning_starts:1000"),
]


class ZooLoader(yaml.SafeLoader):
    """RL Zoo's args.yml and config.yml: an OrderedDict of (key, value) pairs, read as a dict."""


ZooLoader.add_constructor(
    "tag:yaml.org,2002:python/object/apply:collections.OrderedDict",
    lambda loader, node: dict(loader.construct_sequence(node.value[0], deep=True)),
)


def zoo_yaml(path):
    return yaml.load(path.read_text(), Loader=ZooLoader)  # a SafeLoader with one constructor more


def grid(log, output, peer, *extra):
    return [
        "returns",
        *("--algos", "sac", "tqc", "--envs", "Pendulum-v1", "--seeds", "2", "--seeds-per-run", "1"),
        *("-f", str(log), "--output", str(output), "--at-steps", "400", "--peer", peer, *extra, *TINY),
    ]


@pytest.mark.slow  # 48 s on 2 cores under a load of 7: 4 rlbench cells on Ray, then 2 SBX processes
def test_peer_trains_the_same_cells_beside_rlbench(peer_python, tmp_path, capsys, ray_session):
    peer = peer_python
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    assert bench_main(grid(log, output, peer)) == 0  # a refused cell is reported, not a failure
    out = capsys.readouterr().out
    report = output.read_text()
    refusal = "target_update_interval=2 (SBX updates the target critics at every gradient step)"
    for seed in (1, 2):
        assert f"sbx tqc Pendulum-v1 seed {seed}: refused: SBX cannot express {refusal}" in out
        assert f"sbx sac Pendulum-v1 seed {seed}: done in" in out
        assert f"tqc/Pendulum-v1 seed {seed} (refused: SBX cannot express {refusal})" in report
    assert "| Pendulum-v1 | sbx sac | 2 | 400 |" in report and "| Pendulum-v1 | rlbench sac | 2 | 400 |" in report
    # the two systems of one algo are the pair compared (tqc has no peer curve: nothing to compare it with)
    assert "rlbench sac vs sbx sac on Pendulum-v1 at 400: P(improvement) " in report
    assert "rlbench tqc vs" not in report
    assert "SBX through RL Zoo (sbx " in report and ", rl_zoo3 " in report

    cells = sorted((log / "sweeps" / "returns" / "sbx").iterdir())
    assert [cell.name.split("_")[-1] for cell in cells] == ["s1", "s2"]  # sac's two seeds; tqc's refused
    for seed, cell in zip((1, 2), cells, strict=True):
        run = cell / "sac" / "Pendulum-v1_1"
        with np.load(run / "evaluations.npz") as data:
            peer_steps, peer_returns = data["timesteps"], data["results"]
        for rlbench_run in (log / "sac").glob("Pendulum-v1_*"):
            with np.load(rlbench_run / "evaluations.npz") as data:
                assert list(data["timesteps"]) == list(peer_steps) == [200, 400]  # the same evaluation schedule
        assert peer_returns.shape == (2, 1)
        row = f"| sbx sac | Pendulum-v1 | {seed} | {run.relative_to(log)} | 400 | {peer_returns[-1, 0]:.1f} |"
        assert row in report
        # RL Zoo read the translated entry, with this cell's seed
        saved = zoo_yaml(run / "Pendulum-v1" / "args.yml")
        assert (saved["seed"], saved["n_timesteps"], saved["eval_freq"], saved["eval_episodes"]) == (seed, 400, 200, 1)
        config = zoo_yaml(run / "Pendulum-v1" / "config.yml")
        assert (config["batch_size"], config["learning_starts"], config["buffer_size"]) == (16, 300, 1000)
        assert config["policy_kwargs"]["net_arch"] == {"pi": [8], "qf": [8]}

    # The same command again: the peer's finished cells are not run again; --report-only reports them too.
    assert bench_main(grid(log, output, peer)) == 0
    assert "started" not in capsys.readouterr().out
    again = tmp_path / "again.md"
    assert bench_main([*grid(log, again, peer), "--report-only"]) == 0
    assert "| Pendulum-v1 | sbx sac | 2 | 400 |" in again.read_text()


def bad_peers(tmp_path):
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\necho hello\n")
    not_python.chmod(not_python.stat().st_mode | stat.S_IXUSR)
    return [
        (str(tmp_path / "missing" / "python"), "not an executable file"),
        (str(not_python), "not a Python that runs"),
        (sys.executable, "cannot import sbx, rl_zoo3"),  # rlbench's own Python: no SBX in it
    ]


def test_a_peer_that_is_not_a_python_with_sbx_exits_2_before_writing(tmp_path, capsys):
    folder = tmp_path / "work"
    folder.mkdir()
    for peer, why in bad_peers(tmp_path):
        args = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "-f", str(folder / "logs")]
        assert bench_main([*args, "--output", str(folder / "returns.md"), "--peer", peer]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --peer {peer}: {why}"), lines
        assert "pip install sbx-rl rl_zoo3" in lines[0]
        assert list(folder.iterdir()) == []


def test_a_peer_named_by_a_relative_path_is_found_from_the_current_folder(tmp_path, monkeypatch):
    """The peer runs in an empty folder of its own; a relative --peer still means the caller's folder's."""
    from rlbench.bench import peer as sbx
    from rlbench.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    relative = os.path.relpath(sys.executable, tmp_path)  # rlbench's own Python, found: it lacks only SBX
    with pytest.raises(ConfigError, match=f"--peer {re.escape(relative)}: cannot import sbx, rl_zoo3"):
        sbx.probe_peer(relative)


def test_plan_refuses_by_name_and_a_failing_peer_is_reported_per_cell(tmp_path):
    """Without SBX: the grid's cells planned (the refused ones named), then a peer whose process fails (a
    script standing in for its Python): each cell failed with the end of its log, none dropped."""
    from rlbench.bench import peer as sbx
    from rlbench.run.request import RunRequest
    from rlbench.sweep.grid import SweepSpec

    spec = SweepSpec(
        name="returns",
        algos=("sac", "tqc"),
        envs=("Pendulum-v1",),
        seeds=(1, 2),
        n_timesteps=400,
        params_for=(("tqc", ("precision:bfloat16",)),),
        eval_freq=200,
        eval_episodes=1,
    )
    cells = sbx.plan_cells(spec, RunRequest(n_timesteps=400), tmp_path / "sweep")
    assert [(c.cell.algo, c.cell.seed, c.zoo_algo) for c in cells] == [("sac", 1, "sac"), ("sac", 2, "sac"),
                                                                      ("tqc", 1, ""), ("tqc", 2, "")]  # fmt: skip
    assert cells[2].refusal == "SBX cannot express precision='bfloat16' (SBX trains in float32)"
    assert list(tmp_path.iterdir()) == []  # planning writes nothing

    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'Traceback (most recent call last):'\necho 'boom: no such algo' >&2\nexit 3\n")
    failing.chmod(failing.stat().st_mode | stat.S_IXUSR)
    events = []
    sbx.run_cells(cells, sbx.Peer(str(failing), "a stand-in"), spec, on_event=events.append)
    slots = len(os.sched_getaffinity(0))
    assert events.pop(0) == (
        f"SBX peer (a stand-in): 2 of 4 cells to run, up to {slots} processes at a time (one per core); 2 refused"
    )
    assert (
        sorted(e.split(": ", 1)[1] for e in events if "started" not in e)
        == ["failed: exit 3: Traceback (most recent call last): | boom: no such algo"] * 2
    )
    assert list(sbx.not_done(cells)) == [
        "sac/Pendulum-v1 seed 1 (failed: exit 3: Traceback (most recent call last): | boom: no such algo)",
        "sac/Pendulum-v1 seed 2 (failed: exit 3: Traceback (most recent call last): | boom: no such algo)",
        "tqc/Pendulum-v1 seed 1 (refused: SBX cannot express precision='bfloat16' (SBX trains in float32))",
        "tqc/Pendulum-v1 seed 2 (refused: SBX cannot express precision='bfloat16' (SBX trains in float32))",
    ]
    entry = yaml.safe_load((cells[0].folder / "sbx.yml").read_text())["Pendulum-v1"]
    assert (entry["n_timesteps"], entry["policy_kwargs"]["net_arch"]) == (400, {"pi": [256, 256], "qf": [256, 256]})
    report = "\n".join(sbx.report_lines(cells, None))
    assert "SBX cells without a finished run: sac/Pendulum-v1 seed 1 (failed: exit 3" in report

    # Run again (a failed cell is run afresh) with the peer's Python gone since the probe: failed, not raised
    # (the child's launcher, which ties it to this process, says why it could not start it, and exits 127).
    events.clear()
    gone = tmp_path / "gone"
    sbx.run_cells(cells, sbx.Peer(str(gone), "a stand-in"), spec, on_event=events.append)
    why = f"cannot start {gone}: No such file or directory"
    outcomes = [event.split(": ", 1)[1] for event in events[1:] if "started" not in event]
    assert outcomes == [f"failed: exit 127: {why}"] * 2
    assert sbx.outcome(cells[0])["state"] == sbx.FAILED and (cells[0].folder / "peer.log").read_text() == why + "\n"


# -- issue 44 item 1: the probe and the peer import nothing from the folder the benchmark runs in ---------------


def shadowing_folder(tmp_path, marker):
    """A folder with an `sbx` and an `rl_zoo3` that Python would import from the working folder or PYTHONPATH,
    each with a dist-info whose version the probe would read; importing the fake sbx writes `marker`."""
    folder = tmp_path / "shadow"
    (folder / "rl_zoo3").mkdir(parents=True)
    (folder / "sbx.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    (folder / "rl_zoo3" / "__init__.py").write_text("")
    (folder / "rl_zoo3" / "utils.py").write_text("ALGOS = {}\n")
    for dist, version in (("sbx_rl", "0.28.0"), ("rl_zoo3", "2.9.2")):
        info = folder / f"{dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: {version}\n")
    return folder


def test_a_shadowing_folder_is_not_the_peer(tmp_path, capsys, monkeypatch):
    """Issue 44 item 1: run from a folder holding sbx.py and rl_zoo3/ (and on PYTHONPATH), with --peer a
    Python that has neither (rlbench's own): the probe refuses it (exit 2, one line, nothing written), and a
    peer process started there runs none of that folder's code."""
    from rlbench.bench import peer as sbx
    from rlbench.run.request import RunRequest
    from rlbench.sweep.grid import SweepSpec

    marker = tmp_path / "shadow-sbx-imported"
    shadow = shadowing_folder(tmp_path, marker)
    monkeypatch.chdir(shadow)
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    argv = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "-f", str(log), "--output", str(output)]
    assert bench_main([*argv, "--peer", sys.executable, "--report-only"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --peer {sys.executable}: cannot import sbx, rl_zoo3; expected the python of a virtual "
                   f"environment with sbx and rl_zoo3 ({sbx.INSTALL})"]  # fmt: skip
    assert not log.exists() and not output.exists() and not marker.exists()

    # The peer's own process, started from the same folder: no module named sbx, the shadow's never imported.
    spec = SweepSpec(name="returns", algos=("sac",), envs=("Pendulum-v1",), seeds=(1,), n_timesteps=400, eval_freq=200)
    cells = sbx.plan_cells(spec, RunRequest(n_timesteps=400), tmp_path / "sweep")
    events = []
    sbx.run_cells(cells, sbx.Peer(sys.executable, "rlbench's Python"), spec, on_event=events.append)
    assert "No module named 'sbx'" in sbx.outcome(cells[0])["error"], events
    assert not marker.exists()


# -- issue 44 item 4: a stopped or killed `bench returns --peer` leaves no peer training -------------------------

# A stand-in for the peer's Python: it answers the probe as a venv with SBX would, and as a cell's process
# records its pid and trains for minutes (sleeps, as the same process: exec).
STAND_IN_PEER = """#!/bin/sh
case "$*" in
  *importlib.metadata*) echo '{"missing": [], "versions": {"sbx": "0.28.0", "rl_zoo3": "2.9.2"}, "python": "3"}';;
  *) echo $$ >> "$PEER_PIDS"; exec sleep 300;;
esac
"""


def finished_grid(tmp_path):
    """`bench returns` argv (2 seeds of sac on Pendulum-v1, the stand-in peer) whose rlbench cells the sweep's
    manifest records as done: the command goes straight to the peer's cells, without Ray."""
    from rlbench.bench.returns import build_parser, check_args
    from rlbench.sweep.manifest import new_manifest
    from tests.integration.test_scripts import write_evaluations

    peer = tmp_path / "peer-python"
    peer.write_text(STAND_IN_PEER)
    peer.chmod(peer.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "logs"
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "2", "-f", str(log), "-n", "200"]
    argv += ["--eval-freq", "100", "--output", str(tmp_path / "returns.md"), "--peer", str(peer)]
    spec = check_args(build_parser().parse_args(argv))
    manifest = new_manifest(spec, "python -m rlbench.bench returns ...")
    for seed, record in enumerate(manifest.cells.values(), start=1):
        record.state, record.run_dir, record.wall_time_s = "done", f"sac/Pendulum-v1_{seed}", 1.0
        write_evaluations(log / record.run_dir, [100, 200], [-900.0, -500.0])
    manifest.save(log / "sweeps" / "returns")
    return ["returns", *argv]


def alive(pid):
    """Whether `pid` runs (a zombie, dead but not yet reaped by whoever adopted it, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def start_bench_with_peers(tmp_path):
    """The benchmark as its own process, once both peer cells run: (the process, the peers' pids)."""
    from tests.ray_cluster import wait_until

    argv, pids = finished_grid(tmp_path), tmp_path / "peer-pids"
    bench = subprocess.Popen(
        [sys.executable, "-m", "rlbench.bench", *argv],
        cwd=tmp_path,  # the command it prints names the folders relative to it
        env={**os.environ, "PEER_PIDS": str(pids)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def both_started():
        if bench.poll() is not None:
            raise AssertionError(f"the bench exited {bench.returncode} before its peers started: {bench.communicate()}")
        return pids.exists() and len(found := pids.read_text().split()) == 2 and [int(pid) for pid in found]

    return bench, wait_until(both_started, timeout=120, what="both peer cells to start")


def test_a_killed_bench_leaves_no_peer_training(tmp_path):
    """SIGKILL to `bench returns --peer` (no handler runs): the kernel kills its peer processes."""
    from tests.ray_cluster import wait_until

    bench, peers = start_bench_with_peers(tmp_path)
    try:
        assert all(alive(pid) for pid in peers)
        bench.kill()
        bench.communicate(timeout=30)
        wait_until(lambda: not any(alive(pid) for pid in peers), timeout=10, what="the peers to die with the bench")
    finally:
        for pid in filter(alive, peers):  # the old code's orphans
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_bench_kills_its_peers_and_exits_75_with_the_command_that_continues(tmp_path, signum):
    """SIGTERM or SIGINT to `bench returns --peer` while the peer trains: its processes killed, exit 75, one
    line with the command that runs them again; no cell recorded as done or failed (the rerun runs them)."""
    bench, peers = start_bench_with_peers(tmp_path)
    try:
        bench.send_signal(signum)
        err = bench.communicate(timeout=60)[1]
        assert bench.returncode == 75, err
        name = signal.Signals(signum).name
        assert err.splitlines() == [
            f"{name}: the SBX cells still training were killed; the same command runs them again from their start: "
            "python -m rlbench.bench returns --algos sac --envs Pendulum-v1 --seeds 2 -f logs -n 200 --eval-freq 100 "
            "--output returns.md --peer peer-python"
        ]
        assert not any(alive(pid) for pid in peers)
        cells = sorted((tmp_path / "logs" / "sweeps" / "returns" / "sbx").iterdir())
        assert len(cells) == 2 and not any((cell / "peer_cell.json").exists() for cell in cells)
        assert not (tmp_path / "returns.md").exists()
    finally:
        bench.kill()
        for pid in filter(alive, peers):
            os.kill(pid, signal.SIGKILL)


# -- PPO beside SBX's PPO; A2C, which SBX does not have, refused at once ------------------------------------------

CARTPOLE_PPO = {  # RL Zoo's ppo.yml CartPole-v1 entry as rlbench resolves it, in RL Zoo's format for SBX
    "batch_size": 256,
    "clip_range": "lin_0.2",
    "ent_coef": 0.0,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "learning_rate": "lin_0.001",
    "max_grad_norm": 0.5,
    "n_envs": 8,
    "n_epochs": 20,
    "n_steps": 32,
    "n_timesteps": 512,
    "normalize_advantage": True,
    "policy": "MlpPolicy",
    "policy_kwargs": {
        "activation_fn": "tanh",  # by its flax name: the peer's process looks it up (rlbench.bench.peer)
        "log_std_init": 0.0,
        "net_arch": {"pi": [64, 64], "vf": [64, 64]},
        "ortho_init": True,
    },
    "use_sde": False,
    "vf_coef": 0.5,
}


def test_ppo_cells_get_rl_zoos_entry_and_what_sbx_cannot_express_is_refused_by_name(tmp_path):
    """PPO's cells: CartPole-v1's entry written out whole for SBX (its activation by flax name; SB3's
    stats_window_size is SBX's own and left out; the clipped value loss and target_kl are off, and so left out);
    Pendulum-v1's refused for its gSDE. The report says where SBX's PPO differs with no setting to say so."""
    from rlbench.bench import peer as sbx
    from rlbench.run.request import RunRequest
    from rlbench.sweep.grid import SweepSpec

    spec = SweepSpec(name="returns", algos=("ppo",), envs=("CartPole-v1", "Pendulum-v1"), seeds=(1,),
                     n_timesteps=512, eval_freq=256)  # fmt: skip
    cartpole, pendulum = sbx.plan_cells(spec, RunRequest(n_timesteps=512), tmp_path / "sweep")
    assert (cartpole.zoo_algo, cartpole.entry) == ("ppo", CARTPOLE_PPO)
    assert pendulum.entry is None and pendulum.refusal == (
        "SBX cannot express use_sde=True (SBX's PPO repeats one noise key instead of gSDE's state-dependent noise)"
    )
    report = "\n".join(sbx.report_lines([cartpole, pendulum], None))
    assert "`sbx ppo` differs where no setting says so: SBX's PPO initialises its networks with flax's" in report
    assert list(tmp_path.iterdir()) == []


def test_ppo_settings_sbx_cannot_express_are_named():
    from rlbench.bench.peer_hyperparams import Untranslatable, peer_entry
    from rlbench.run.experiment import RunRequest, resolve

    params = ("clip_range_vf:0.2", "target_kl:0.02", "policy_kwargs:dict(activation_fn=nn.ReLU)")
    exp = resolve(RunRequest(algo="ppo", env="CartPole-v1", params=params, n_timesteps=512, verbose=0))
    with pytest.raises(Untranslatable) as refused:
        peer_entry("ppo", exp.hyperparams)
    assert [setting.split(" (")[0] for setting in refused.value.settings] == ["clip_range_vf=0.2", "target_kl=0.02"]
    assert "SBX's PPO adapts the learning rate to target_kl" in str(refused.value)
    # The activation goes by its flax name (RL Zoo's MuJoCo entries: ReLU), which the peer looks up
    allowed = {**exp.hyperparams, "clip_range_vf": None, "target_kl": None}
    assert peer_entry("ppo", allowed)[1]["policy_kwargs"]["activation_fn"] == "relu"


def test_a2c_beside_the_peer_is_one_line_exit_2_before_anything(tmp_path, capsys):
    """SBX 0.28 has no A2C: `--algos ... a2c --peer` is refused before the peer is probed or anything written
    (any --peer, even one that is not a Python with SBX)."""
    folder = tmp_path / "work"
    folder.mkdir()
    args = ["returns", "--algos", "ppo", "a2c", "--envs", "CartPole-v1", "-f", str(folder / "logs")]
    assert bench_main([*args, "--output", str(folder / "returns.md"), "--peer", str(tmp_path / "no-python")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --peer: SBX 0.28 has no A2C, so nothing can train a2c beside rlbench; run it without --peer (SBX's "
        "peers here: sac, droq, tqc, crossq, td3, ddpg, ppo, dqn)"
    ]
    assert list(folder.iterdir()) == []


@pytest.mark.slow  # one rlbench cell on Ray, then one SBX process through RL Zoo
def test_ppo_trains_beside_sbx_ppo_with_rl_zoos_entry(peer_python, tmp_path, capsys, ray_session):
    """`bench returns --algos ppo --envs CartPole-v1 --peer`: two rollouts of RL Zoo's entry (8 envs x 32 steps)
    for each system, evaluated at the same steps; RL Zoo trained SBX's PPO with the entry rlbench resolved."""
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    argv = ["returns", "--algos", "ppo", "--envs", "CartPole-v1", "--seeds", "1", "-f", str(log), "--output"]
    argv += [str(output), "-n", "512", "--eval-freq", "256", "--eval-episodes", "2", "--peer", peer_python]
    assert bench_main(argv) == 0
    assert "sbx ppo CartPole-v1 seed 1: done in" in capsys.readouterr().out
    report = output.read_text()
    assert "| CartPole-v1 | sbx ppo | 1 | 512 |" in report and "| CartPole-v1 | rlbench ppo | 1 | 512 |" in report
    assert "`sbx ppo` differs where no setting says so" in report
    (cell,) = (log / "sweeps" / "returns" / "sbx").iterdir()
    run = cell / "ppo" / "CartPole-v1_1"
    (rlbench_run,) = (log / "ppo").glob("CartPole-v1_*")
    for folder in (run, rlbench_run):
        with np.load(folder / "evaluations.npz") as data:
            assert list(data["timesteps"]) == [256, 512] and data["results"].shape == (2, 2)
    config = zoo_yaml(run / "CartPole-v1" / "config.yml")
    assert {key: config[key] for key in CARTPOLE_PPO} == CARTPOLE_PPO


def test_ppo_normalize_reaches_sbx_as_vec_normalizes_arguments():
    """RL Zoo's MountainCar-v0 PPO entry normalizes observations and rewards: the peer's entry carries
    VecNormalize's arguments, with the entry's gamma (RL Zoo sets it so), and the rest of the entry as it is."""
    from rlbench.bench.peer_hyperparams import peer_entry
    from rlbench.run.experiment import RunRequest, resolve

    exp = resolve(RunRequest(algo="ppo", env="MountainCar-v0", n_timesteps=1024, verbose=0))
    algo, entry = peer_entry("ppo", exp.hyperparams)
    assert algo == "ppo" and entry["normalize"] == {"norm_obs": True, "norm_reward": True, "clip_obs": 10.0,
                                                    "clip_reward": 10.0, "gamma": 0.99, "epsilon": 1e-8}  # fmt: skip
    assert (entry["n_envs"], entry["n_steps"], entry["n_epochs"], entry["gae_lambda"]) == (16, 16, 4, 0.98)
