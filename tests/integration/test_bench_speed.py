"""`python -m rlbench.bench speed`: its FLOP count against one counted by hand, and one tiny invocation
end to end (rows in the peer script's fields, written as they come, the peer called with the same
settings on the backend asked for)."""

import json
import os
import signal
import subprocess
import sys
import time
from itertools import pairwise

import psutil
import pytest

from rlbench.bench.children import row_from
from rlbench.bench.row import bench_config, gradient_step_gflop
from rlbench.bench.speed import machine
from rlbench.bench.speed import main as speed_main
from rlbench.config.registry import ALGORITHMS
from rlbench.types import EnvSpec
from tests.conftest import REPO_ROOT
from tests.integration.test_bench_peer import CARTPOLE_PPO


def dense_macs(widths):
    return sum(a * b for a, b in pairwise(widths))


def test_sac_gradient_step_flops_match_a_count_by_hand():
    """SAC, HalfCheetah shapes (obs 17, action 6), [256, 256] actor and critics, batch 256, 2 critics.
    Multiply-accumulates per sample, counting matrix products only:
    critic step: actor forward on next_obs, 2 target critics forward, 2 online critics forward, and their
    backward: weight gradients (as many as the forward) plus input gradients of every layer but the first
    (the observation-action input is data);
    actor step: actor forward, 2 critics forward, their input gradients including the first layer (the
    action is differentiated), and the actor's backward (weights, and inputs of all but its first layer)."""
    obs, act, hidden = 17, 6, 256
    actor = [obs, hidden, hidden, 2 * act]  # mean and log-std heads
    critic = [obs + act, hidden, hidden, 1]
    critic_step = (
        dense_macs(actor)
        + 2 * dense_macs(critic)
        + 2 * dense_macs(critic)
        + 2 * (dense_macs(critic) + dense_macs(critic[1:]))
    )
    actor_step = (
        dense_macs(actor) + 2 * dense_macs(critic) + 2 * dense_macs(critic) + dense_macs(actor) + dense_macs(actor[1:])
    )
    by_hand = 2 * 256 * (critic_step + actor_step) / 1e9  # 2 FLOP per multiply-accumulate, batch 256

    cfg = bench_config("sac", 1, [256, 256])
    spec = EnvSpec(obs, act)
    learner = ALGORITHMS["sac"].make_learner(cfg, spec)
    gflop = gradient_step_gflop(learner, cfg, spec)
    assert by_hand == pytest.approx(0.5815, abs=1e-4)
    # XLA also counts the elementwise work (activations, Adam, the losses): a few percent more.
    assert by_hand <= gflop <= 1.05 * by_hand


PEER_STAND_IN = """
import json, os, sys
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
print("peer warm-up chatter")
print(json.dumps({"system": "stand-in", "algo": value("--algo"), "n_envs": int(value("--n-envs")),
                  "gradient_steps": int(value("--gradient-steps")), "steps": int(value("--steps")),
                  "qf": [int(w) for w in args[args.index("--qf") + 1:]],
                  "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
"""


def test_speed_rows_end_to_end(tmp_path, capsys):
    """One tiny row on the CPU. The peer is SBX in its own venv in real use (never an rlbench dependency,
    so not here): a stand-in script checks what the benchmark hands it and reads back its last line."""
    peer = tmp_path / "peer.py"
    peer.write_text(PEER_STAND_IN)
    output = tmp_path / "rows.jsonl"
    args = [
        "--case",
        "sac",
        "1",
        "1",
        "40",
        "--qf",
        "32",
        "32",
        "--device",
        "cpu",
        "--peer",
        sys.executable,
        "--peer-script",
        str(peer),
        "--output",
        str(output),
        "--update-seconds",
        "0.5",
    ]
    assert speed_main(args) == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert capsys.readouterr().out.splitlines() == [json.dumps(r) for r in rows]
    machine, ours, theirs = rows
    assert set(machine["machine"]["matmul_gflops"]) == {"float32", "bfloat16"}
    assert machine["machine"]["backend"] == "cpu"
    assert (ours["system"], ours["algo"], ours["n_envs"], ours["gradient_steps"], ours["qf"]) == (
        "rlbench",
        "sac",
        1,
        1,
        [32, 32],
    )
    assert ours["env_steps_per_s"] > 0 and ours["update_only_grad_steps_per_s"] > 0 and ours["compile_s"] > 0
    assert ours["grad_steps_per_s"] == pytest.approx(ours["env_steps_per_s"], rel=0.01)  # 1 step per env step
    assert ours["fraction_of_peak"] == pytest.approx(ours["achieved_gflops"] / ours["peak_gflops"], abs=1e-3)
    assert theirs == {
        "system": "stand-in",
        "algo": "sac",
        "n_envs": 1,
        "gradient_steps": 1,
        "steps": 40,
        "qf": [32, 32],
        "cuda_visible": "",
        "device": "cpu",
    }  # the CPU peer sees no GPU


def test_first_step_rows_are_cold_then_warm_in_a_fresh_cache(tmp_path):
    """--first-step: per case, two fresh processes sharing a new cache (the first fills it, the second
    loads from it); the matrix-multiply peak, a throughput yardstick, is not measured. That the second
    process really hits is tested in test_compile_cache.py."""
    output = tmp_path / "rows.jsonl"
    assert (
        speed_main(
            [
                "--first-step",
                "--case",
                "sac",
                "1",
                "1",
                "0",
                "--qf",
                "32",
                "32",
                "--device",
                "cpu",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    machine, cold, warm = [json.loads(line) for line in output.read_text().splitlines()]
    assert machine["machine"]["compile_cache"] == "fresh per case (cold, then warm)"
    assert "matmul_gflops" not in machine["machine"]
    for row, state in ((cold, "cold"), (warm, "warm")):
        assert row["compile_cache"] == state and row["first_grad_step_s"] > 0 and "error" not in row
        assert (row["algo"], row["qf"], row["n_envs"]) == ("sac", [32, 32], 1)


def python_run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_a_failing_row_is_kept_as_an_error_not_raised():
    assert row_from(python_run("print('chatter'); print('{\"x\": 1}')"), {"algo": "sac"}) == {"x": 1}
    failed = python_run("import sys; print('one\\ntwo\\nthree\\nfour', file=sys.stderr); sys.exit(3)")
    assert row_from(failed, {"algo": "sac"}) == {"algo": "sac", "error": "exit 3: two | three | four"}


def test_machine_line_records_xla_flags(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert "xla_flags" not in machine()
    monkeypatch.setenv("XLA_FLAGS", " --xla_gpu_enable_command_buffer=+WHILE ")
    assert machine()["xla_flags"] == "--xla_gpu_enable_command_buffer=+WHILE"


PEER_RATE = """
import json, sys
steps = int(sys.argv[sys.argv.index("--steps") + 1])
print(json.dumps({"system": "stand-in", "env_steps_per_s": 100.0, "steps": steps}))
"""


@pytest.mark.slow  # five benchmark processes, two of them at a time: about half a minute
def test_n_seeds_compares_the_packings_of_k_seeds(tmp_path):
    """--n-seeds 2: two vmapped seeds in one process; two pinned single-seed processes (rlbench's, and the
    peer's: a stand-in reporting 100 env-steps/s each); one vmapped seed in each of two pinned processes.
    Aggregates count every seed, per-seed rates are the aggregate over K."""
    peer = tmp_path / "peer.py"
    peer.write_text(PEER_RATE)
    output = tmp_path / "rows.jsonl"
    argv = ["--n-seeds", "2", "--case", "sac", "1", "1", "200", "--qf", "16", "--env", "Pendulum-v1", "--device", "cpu"]
    argv += ["--output"]
    assert speed_main([*argv, str(output), "--peer", sys.executable, "--peer-script", str(peer)]) == 0
    _, vmapped, processes, peer_processes, halves = [json.loads(line) for line in output.read_text().splitlines()]
    assert vmapped["packing"] == "one process, K vmapped seeds" and vmapped["n_seeds"] == 2
    assert vmapped["env_steps_per_s"] == pytest.approx(2 * vmapped["per_seed_env_steps_per_s"], abs=0.2)
    assert vmapped["update_only_grad_steps_per_s"] > 0
    for row in (processes, halves):
        assert row["env_steps_per_s"] == pytest.approx(sum(p["env_steps_per_s"] for p in row["processes"]), abs=0.2)
        assert row["per_seed_env_steps_per_s"] == pytest.approx(row["env_steps_per_s"] / 2, abs=0.1)
    assert processes["packing"] == "K processes, two at a time, pinned" and len(processes["processes"]) == 2
    assert halves["packing"] == "two pinned processes, K/2 vmapped seeds each"
    assert (peer_processes["system"], peer_processes["env_steps_per_s"]) == ("peer", 200.0)


PEER_THAT_HANGS = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # as SBX's own workers
with open(os.environ["PEER_PIDS"] + ".tmp", "w") as file:
    file.write(f"{os.getpid()} {child.pid}")
os.rename(os.environ["PEER_PIDS"] + ".tmp", os.environ["PEER_PIDS"])
time.sleep(300)
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def start_bench(tmp_path, *extra):
    command = [sys.executable, "-m", "rlbench.bench", "speed", "--case", "sac", "1", "1", "40", "--qf", "8"]
    command += ["--env", "Pendulum-v1", "--device", "cpu", "--update-seconds", "0.1", *extra]
    return subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env={**os.environ, "PEER_PIDS": str(tmp_path / "peer.pids")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(condition, bench, timeout=300):
    deadline = time.monotonic() + timeout
    while not condition():
        assert bench.poll() is None and time.monotonic() < deadline, bench.communicate()
        time.sleep(0.05)


def stop_and_check_none_left(bench, pids):
    """SIGTERM the benchmark: it exits 143 (128 + SIGTERM) and none of `pids` outlives it."""
    bench.send_signal(signal.SIGTERM)
    assert bench.wait(timeout=30) == 128 + signal.SIGTERM, bench.communicate()
    deadline = time.monotonic() + 10
    while not all(map(gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in pids if not gone(pid)]
    for pid in survivors:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


def test_sigterm_kills_the_row_process_it_is_waiting_for(tmp_path):
    """Issue 32 item 14, the mechanism on rlbench's own child (a row in a fresh interpreter): SIGTERM while
    it runs kills its process group; exit 143, no orphan. The peer's case is the slow test below."""
    bench = start_bench(tmp_path)
    # Until the forked child has exec'd, its command line is still its parent's (seen under a load of 12).
    wait_until(lambda: any("--one-row" in child.cmdline() for child in psutil.Process(bench.pid).children()), bench)
    (row,) = psutil.Process(bench.pid).children()
    assert "--one-row" in row.cmdline() and os.getpgid(row.pid) == row.pid  # a process group of its own
    stop_and_check_none_left(bench, [row.pid])


@pytest.mark.slow
def test_sigterm_kills_the_peer_and_everything_it_started(tmp_path):
    """Issue 32 item 14: SIGTERM ended `bench speed` and left the SBX peer training on as an orphan. A
    stand-in peer that starts a process of its own and hangs: after SIGTERM, neither is left. (Slow: the
    peer runs after an rlbench row, which compiles.)"""
    peer = tmp_path / "peer.py"
    peer.write_text(PEER_THAT_HANGS)
    bench = start_bench(tmp_path, "--peer", sys.executable, "--peer-script", str(peer))
    wait_until((tmp_path / "peer.pids").exists, bench)
    stop_and_check_none_left(bench, list(map(int, (tmp_path / "peer.pids").read_text().split())))


def test_a_row_resolves_the_config_its_cost_analysis_counts():
    """A row's run is resolved as train.py's (no hyperparameter file: the row's own entry), to the config
    bench_config builds without an env."""
    from rlbench.bench.row import bench_experiment

    exp = bench_experiment("droq", "Pendulum-v1", 1, 20, [256, 256], "float32", 2000)
    assert exp.learner_config == bench_config("droq", 20, [256, 256])
    assert (exp.run.n_timesteps, exp.run.eval_freq, exp.seeds) == (2000, -1, (0,))


def test_policy_reaches_the_rlbench_row_and_the_peer(tmp_path):
    """--policy SimbaPolicy: rlbench's row resolves SimBa networks and the peer script is handed --policy."""
    from rlbench.bench.row import bench_experiment
    from rlbench.bench.speed import peer_row

    exp = bench_experiment("sac", "Pendulum-v1", 1, 1, [32, 32], "float32", 2000, policy="SimbaPolicy")
    assert exp.learner_config.critic.family == exp.learner_config.actor.family == "simba"
    assert exp.hyperparams["policy"] == "SimbaPolicy"
    peer = tmp_path / "peer.py"
    peer.write_text("import json, sys\nprint(json.dumps({'argv': sys.argv[1:]}))\n")
    argv = peer_row(sys.executable, peer, "sac", "Pendulum-v1", 1, 1, 40, [32, 32], "cpu", "SimbaPolicy")["argv"]
    assert argv[argv.index("--policy") + 1] == "SimbaPolicy"
    argv = peer_row(sys.executable, peer, "sac", "Pendulum-v1", 1, 1, 40, [32, 32], "cpu")["argv"]
    assert "--policy" not in argv  # MlpPolicy: the peer's default, so older peer scripts still run


# -- entry rows: PPO, A2C, DQN and QR-DQN train RL Zoo's entry for the env --------------------------------------


PPO_PEER_STAND_IN = """
import json, os, sys
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
print("peer warm-up chatter")
print(json.dumps({"system": "stand-in", "env": value("--env"), "steps": int(value("--steps")),
                  "entry": json.loads(value("--entry")), "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
"""


def test_ppo_row_end_to_end_with_rl_zoos_entry(tmp_path, capsys):
    """`--algos ppo --env CartPole-v1`: one row in a fresh process trains RL Zoo's entry (8 envs x 32 steps: a
    rollout of 256, one minibatch of 256, 20 epochs: 20 minibatch steps per rollout), --steps rounded up to a
    whole rollout; the peer script is handed the same entry in RL Zoo's format (a stand-in here)."""
    peer = tmp_path / "peer.py"
    peer.write_text(PPO_PEER_STAND_IN)
    output = tmp_path / "rows.jsonl"
    argv = ["--algos", "ppo", "--env", "CartPole-v1", "--steps", "200", "--device", "cpu", "--update-seconds", "0.2"]
    argv += ["--peer", sys.executable, "--peer-on-policy-script", str(peer), "--output", str(output)]
    assert speed_main(argv) == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert capsys.readouterr().out.splitlines() == [json.dumps(r) for r in rows]
    _, ours, theirs = rows
    case = {key: ours[key] for key in ("system", "loop", "algo", "env", "n_envs", "rollout", "batch_size")}
    assert case == {"system": "rlbench", "loop": "host", "algo": "ppo", "env": "CartPole-v1", "n_envs": 8,
                    "rollout": 256, "batch_size": 256}  # fmt: skip
    assert (ours["grad_steps_per_rollout"], ours["steps"]) == (20, 256)  # counted by the learner state's `step`
    assert ours["grad_steps_per_s"] == pytest.approx(ours["env_steps_per_s"] * 20 / 256, rel=0.01)
    assert ours["update_only_grad_steps_per_s"] > 0 and ours["update_compile_s"] > 0
    assert ours["loop_efficiency"] == pytest.approx(ours["grad_steps_per_s"] / ours["update_only_grad_steps_per_s"],
                                                    abs=2e-3)  # fmt: skip
    # A loop's body counted once by XLA, and no minibatch step exposed by the learner: not counted, not faked.
    assert ours["gflop_per_grad_step"] == ours["achieved_gflops"] == "n/a" and "fraction_of_peak" not in ours
    assert (theirs["system"], theirs["env"], theirs["steps"], theirs["cuda_visible"]) == ("stand-in", "CartPole-v1",
                                                                                          256, "")  # fmt: skip
    assert theirs["entry"] == {**CARTPOLE_PPO, "n_timesteps": 100_000}  # the file's budget: no -n here


def test_a_peer_that_cannot_express_the_entry_is_a_refused_row_not_a_run(tmp_path):
    """RL Zoo's Pendulum-v1 PPO entry explores with gSDE, which SBX's PPO only imitates (one repeated noise key):
    the peer's row names the setting, and nothing is started (the script does not exist)."""
    from rlbench.bench.entry_row import entry_peer_row

    row = entry_peer_row(sys.executable, tmp_path / "absent.py", "ppo", "Pendulum-v1", None)
    assert (row["system"], row["algo"], row["env"], row["rollout"], row["steps"]) == ("peer", "ppo", "Pendulum-v1",
                                                                                      4096, 16 * 4096)  # fmt: skip
    assert row["refused"].startswith("SBX cannot express use_sde=True (SBX's PPO repeats one noise key")
    assert "error" not in row


UNKNOWN = (
    "error: unknown algorithm 'ppa'; did you mean 'ppo'? (valid: sac, droq, crossq, tqc, td3, ddpg, ppo, a2c, dqn, "
    "qrdqn)"
)
NO_A2C = (
    "error: --peer: SBX 0.28 has no A2C, so nothing can train a2c beside rlbench; run it without --peer (SBX's peers "
    "here: sac, droq, tqc, crossq, td3, ddpg, ppo, dqn)"
)


@pytest.mark.parametrize(
    ("extra", "line"), [(["--algos", "ppa"], UNKNOWN), (["--algos", "ppo", "a2c", "--peer", sys.executable], NO_A2C)]
)
def test_an_unknown_algorithm_or_a2c_beside_the_peer_is_one_line_exit_2(tmp_path, capsys, extra, line):
    output = tmp_path / "rows.jsonl"
    assert speed_main([*extra, "--device", "cpu", "--output", str(output)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    assert not output.exists()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (
            ["--case", "ppo", "8", "20", "1000"],
            "--case ppo: entry rows train RL Zoo's entry for --env; use --algos",
        ),
        (["--algos", "ppo", "--precision", "bfloat16"], "--precision: not with entry rows (ppo)"),
        (["--algos", "a2c", "--n-seeds", "2"], "--n-seeds: not with entry rows (a2c)"),
        (["--algos", "ppo", "--first-step"], "--first-step: not with entry rows (ppo)"),
        (["--algos", "sac", "--case", "sac", "1", "1", "10"], "--algos and --case: one or the other"),
    ],
)
def test_flags_the_entry_rows_do_not_take_are_usage_errors(capsys, extra, named):
    with pytest.raises(SystemExit) as exited:
        speed_main([*extra, "--device", "cpu"])
    assert exited.value.code == 2 and named in capsys.readouterr().err


def test_algos_selects_each_algorithms_default_cases_with_steps():
    """--algos: the off-policy algorithms' DEFAULT_CASES (else one env and one gradient step), with --steps; the
    on-policy ones are rows of their own (cases_from leaves them out)."""
    from rlbench.bench.speed import build_parser, cases_from

    args = build_parser().parse_args(["--algos", "sac", "td3", "ppo", "--steps", "500"])
    assert cases_from(args) == [("sac", 1, 1, 500, [256, 256]), ("sac", 8, 8, 500, [256, 256]),
                                ("td3", 1, 1, 500, [256, 256])]  # fmt: skip


@pytest.mark.slow  # SBX's PPO in the peer's venv: its imports and compilation, about 15 s
def test_ppo_row_beside_sbx_ppo_on_the_same_entry(peer_python, tmp_path):
    """The real peer: benchmarks/sbx_entry_row_speed.py builds SBX's PPO from the translated entry and times
    it as rlbench's row is timed (two rollouts of warm-up, then whole rollouts)."""
    output = tmp_path / "rows.jsonl"
    argv = ["--algos", "ppo", "--env", "CartPole-v1", "--steps", "512", "--device", "cpu", "--update-seconds", "0.2"]
    assert speed_main([*argv, "--peer", peer_python, "--output", str(output)]) == 0
    _, ours, theirs = [json.loads(line) for line in output.read_text().splitlines()]
    for row in (ours, theirs):
        assert (row["n_envs"], row["rollout"], row["batch_size"], row["steps"]) == (8, 256, 256, 512)
        assert row["grad_steps_per_rollout"] == 20 and row["env_steps_per_s"] > 0
    assert (theirs["system"], theirs["sbx_version"], theirs["device"]) == ("sbx", "0.28.0", "cpu")


@pytest.mark.slow  # SBX's DQN in the peer's venv: its imports and compilation, about 10 s
def test_dqn_row_beside_sbx_dqn_on_the_same_entry(peer_python, tmp_path):
    """RL Zoo's CartPole-v1 DQN entry (train_freq 256, 128 gradient steps of 64): both rows warm up past
    learning_starts 1000 and two updates, then time two whole updates; SBX's DQN built from the translated entry."""
    output = tmp_path / "rows.jsonl"
    argv = ["--algos", "dqn", "--env", "CartPole-v1", "--steps", "512", "--device", "cpu", "--update-seconds", "0.2"]
    assert speed_main([*argv, "--peer", peer_python, "--output", str(output)]) == 0
    _, ours, theirs = [json.loads(line) for line in output.read_text().splitlines()]
    for row in (ours, theirs):
        assert (row["n_envs"], row["rollout"], row["batch_size"], row["steps"]) == (1, 256, 64, 512)
        assert row["grad_steps_per_rollout"] == 128 and row["env_steps_per_s"] > 0
    assert ours["grad_steps_per_s"] == pytest.approx(ours["env_steps_per_s"] * 128 / 256, rel=0.01)
    assert (theirs["system"], theirs["algo"], theirs["sbx_version"]) == ("sbx", "dqn", "0.28.0")


@pytest.mark.slow  # the device loop's first chunk (7936 env steps) is its warm-up: about 20 s for both rows
def test_ppo_on_a_jax_native_env_trains_its_gymnasium_twins_entry(tmp_path):
    """`--algos ppo --env gymnax:CartPole-v1`: the device-loop row and its host twin's both train RL Zoo's
    CartPole-v1 entry (RL Zoo's files name gymnasium's ids), the device row timed after its first chunk."""
    pytest.importorskip("gymnax")
    output = tmp_path / "rows.jsonl"
    argv = ["--algos", "ppo", "--env", "gymnax:CartPole-v1", "--steps", "256", "--device", "cpu"]
    assert speed_main([*argv, "--update-seconds", "0.2", "--output", str(output)]) == 0
    _, device, host = [json.loads(line) for line in output.read_text().splitlines()]
    assert (device["loop"], device["env"], device["entry_of"], host["loop"], host["env"]) == (
        "device", "gymnax:CartPole-v1", "CartPole-v1", "host", "CartPole-v1"
    )  # fmt: skip
    for row in (device, host):
        assert (row["n_envs"], row["rollout"], row["grad_steps_per_rollout"], row["steps"]) == (8, 256, 20, 256)
