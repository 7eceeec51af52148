"""`python -m rlbench.bench returns`, a front end of the sweep engine: a CI-sized grid, its report checked
against the evaluations.npz files by hand, resumability (finished runs skipped, a Ctrl-C'd grid continued
from its checkpoint by the same command), refused changes of settings, --report-only and argument errors."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import yaml

from rlbench.bench.__main__ import main as bench_main
from rlbench.report.returns import REFERENCES, Summary, reference_cells
from tests.conftest import REPO_ROOT
from tests.integration.test_scripts import without_module

pytestmark = pytest.mark.filterwarnings("ignore:.*InvertedPendulum-v4 is out of date:DeprecationWarning")

ALGOS = ("sac", "crossq")
ENVS = ("Pendulum-v1", "InvertedPendulum-v4")  # InvertedPendulum: short episodes, cheap evaluations
# learning_starts above -n: no gradient step, so no update to compile. The grid exercises the benchmark's
# bookkeeping; training itself is covered elsewhere (and by the resume test below).
TINY = [
    "-n",
    "600",
    "--eval-freq",
    "200",
    "--eval-episodes",
    "1",
    "-params",
    "learning_starts:1000",
    "policy_kwargs:dict(net_arch=[8])",
    "batch_size:16",
]
PER_ALGO = ["--params-for", "crossq", "batch_size:8", "gamma:0.9"]


@pytest.fixture(autouse=True)
def ray_tmpdir(monkeypatch):
    """Each test's Ray instance keeps its sockets and logs in its own folder (a short path: Ray's socket
    paths must fit in 107 bytes, which pytest's tmp_path does not leave room for)."""
    folder = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    yield
    shutil.rmtree(folder, ignore_errors=True)


def grid_args(log, output, *extra):
    return [
        "returns",
        "--algos",
        *ALGOS,
        "--envs",
        *ENVS,
        "--seeds",
        "2",
        "--seeds-per-run",
        "2",
        "-f",
        str(log),
        "--output",
        str(output),
        *extra,
        *TINY,
        *PER_ALGO,
    ]


def by_hand(values):
    """mean, IQM (a quarter of the sorted values dropped at each end) and, for two seeds, the bootstrap
    interval of the mean: resampling two values gives means a, (a+b)/2, b with chances 1/4, 1/2, 1/4, so the
    2.5% and 97.5% percentiles of 2000 resamples are the smaller and the larger value."""
    ordered = np.sort(values)
    k = len(ordered) // 4
    assert len(values) == 2
    return f"{values.mean():.1f} | {ordered[k : len(ordered) - k].mean():.1f} | ({ordered[0]:.1f}, {ordered[-1]:.1f})"


def run_folders(log):
    return sorted(p.relative_to(log) for p in log.rglob("*") if p.is_dir() and "sweeps" not in p.parts)


def manifest_cells(log, name="returns"):
    return json.loads((log / "sweeps" / name / "manifest.json").read_text())["cells"]


def test_grid_report_then_rerun_skips(tmp_path, capsys, ray_session):
    """Eight cells (2 algos x 2 envs x 2 seeds, crossq with its own --params-for) run as one sweep; the
    report's statistics are recomputed from the runs' evaluations.npz, its runs table from the manifest."""
    log, output = tmp_path / "logs", tmp_path / "report" / "returns.md"
    assert bench_main(grid_args(log, output, "--at-steps", "500")) == 0
    out = capsys.readouterr().out
    assert "Sweep returns: 8 cells, 8 to run in 4 processes" in out
    cells = manifest_cells(log)
    assert len(cells) == 8 and {record["state"] for record in cells.values()} == {"done"}
    report = output.read_text()
    lines = report.splitlines()
    for env in ENVS:
        for algo in ALGOS:
            records = [cells[f"{algo}/{env}/-/{seed}"] for seed in (1, 2)]
            runs = [log / record["run_dir"] for record in records]
            data = [np.load(run / "evaluations.npz") for run in runs]
            for d in data:
                np.testing.assert_array_equal(d["timesteps"], [200, 400, 600])
            finals = np.array([d["results"][-1].mean() for d in data])
            at_400 = np.array([d["results"][1].mean() for d in data])  # the last evaluation at or below 500
            assert f"| {env} | {algo} | 2 | 600 | {by_hand(finals)} | - | - |" in lines
            assert f"| {env} | {algo} | 2 | 400 | {by_hand(at_400)} | - | - |" in lines
            for seed, run, record, final in zip((1, 2), runs, records, finals, strict=True):
                assert yaml.safe_load((run / env / "args.yml").read_text())["seed"] == seed  # the seed's own folder
                row = f"| {algo} | {env} | {seed} | {record['run_dir']} | 600 | {final:.1f} | "
                assert f"{row}{record['wall_time_s']:.0f} |" in lines
            config = yaml.safe_load((runs[0] / env / "config.yml").read_text())
            assert (config["n_timesteps"], config["learning_starts"]) == (600, 1000)
            assert (config["batch_size"], config["gamma"]) == ((8, 0.9) if algo == "crossq" else (16, 0.99))
    assert "crossq `learning_starts:1000 policy_kwargs:dict(net_arch=[8]) batch_size:8 gamma:0.9`" in report
    for env in ENVS:
        png = output.parent / f"returns_{env}.png"
        assert f"]({png.name})" in report
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        import matplotlib.pyplot as plt

        assert plt.imread(png).shape[0] > 100  # decodes
    assert "python -m rlbench.bench returns --algos sac crossq" in report and "Machine: " in report

    def without_date(text):
        return [line for line in text.splitlines() if not line.startswith("Date: ")]

    folders = run_folders(log)
    stamps = {p: p.stat().st_mtime_ns for p in log.rglob("evaluations.npz")}
    assert bench_main(grid_args(log, output, "--at-steps", "500")) == 0
    assert "Sweep returns: nothing to do, all 8 cells ran earlier (8 done, 0 failed)" in capsys.readouterr().out
    assert run_folders(log) == folders
    assert stamps == {p: p.stat().st_mtime_ns for p in log.rglob("evaluations.npz")}
    assert without_date(output.read_text()) == without_date(report)

    # --report-only reports what the manifest records, and trains nothing.
    assert bench_main([*grid_args(log, output, "--at-steps", "500"), "--report-only"]) == 0
    assert "8 runs: 8 finished, 0 not (--report-only" in capsys.readouterr().out
    assert without_date(output.read_text()) == without_date(report)

    # A later step count than the runs reach: n/a. --at-steps picks a report column, not other runs.
    longer = tmp_path / "longer.md"
    assert bench_main(grid_args(log, longer, "--at-steps", "100000")) == 0
    assert "| Pendulum-v1 | sac | 2 | n/a | n/a | n/a | n/a | - | - |" in longer.read_text().splitlines()
    assert run_folders(log) == folders

    # Other settings under the same name are refused before anything runs, the difference named.
    assert bench_main([*grid_args(log, tmp_path / "other.md"), "-n", "400"]) == 2
    err = capsys.readouterr().err
    assert "sweep 'returns'" in err and "n_timesteps: 600 there, 400 now" in err and "another --name" in err
    other = [*grid_args(log, tmp_path / "other.md")[:-1], "gamma:0.8", "--report-only"]  # crossq's own settings
    assert bench_main(other) == 2
    assert 'params_for: {"crossq": ["batch_size:8", "gamma:0.9"]} there' in capsys.readouterr().err
    assert not (tmp_path / "other.md").exists() and run_folders(log) == folders
    # Under another name they are another sweep; with nothing of it trained, --report-only has nothing to show.
    assert bench_main([*grid_args(log, tmp_path / "other.md"), "-n", "400", "--name", "n400", "--report-only"]) == 1
    assert "no finished run to report" in capsys.readouterr().err
    assert not (tmp_path / "other.md").exists() and run_folders(log) == folders


@pytest.mark.parametrize(
    ("flag", "bad", "expected"),
    [
        (
            "--algos",
            "sacc",
            "unknown algorithm 'sacc'; did you mean 'sac'? (valid: sac, droq, crossq, tqc, td3, ddpg, ppo, a2c, dqn, "
            "qrdqn)",
        ),
        ("--envs", "Pendulum-v9", "environment 'Pendulum-v9' not found"),
        ("--params-for", "droq", "--params-for droq: not one of --algos (sac)"),
        ("--params-for", "sac", "--params-for sac: expected KEY:VALUE overrides after the algorithm"),
        ("--seeds-per-run", "0", "--seeds-per-run: expected an integer >= 1, got 0"),
    ],
)
def test_unknown_names_exit_2_before_writing(tmp_path, capsys, flag, bad, expected):
    args = [
        "returns",
        "--algos",
        "sac",
        "--envs",
        "Pendulum-v1",
        "-f",
        str(tmp_path / "logs"),
        "--output",
        str(tmp_path / "returns.md"),
        "-n",
        "100",
        "--eval-freq",
        "50",
        "--seeds-per-run",
        "1",
        "--params-for",
        "sac",
        "gamma:0.9",
    ]
    args[args.index(flag) + 1] = bad
    if bad == "sac":
        args.remove("gamma:0.9")
    assert bench_main(args) == 2
    err = capsys.readouterr().err
    assert expected in err
    if flag == "--envs":
        assert "did you mean Pendulum-v1" in err and "with published references: HalfCheetah-v4" in err
    assert list(tmp_path.iterdir()) == []


def test_summary_and_references_by_hand():
    s = Summary.of(np.array([1.0, 2.0, 3.0, 100.0]))
    # mean (1 + 2 + 3 + 100) / 4 = 26.5; IQM drops one value at each end: (2 + 3) / 2 = 2.5
    assert (s.n, s.mean, s.iqm) == (4, 26.5, 2.5) and 1.0 <= s.low <= s.mean <= s.high <= 100.0
    assert Summary.of(np.array([5.0])).cells() == "5.0 | 5.0 | n/a (1 seed)"
    assert reference_cells("Hopper-v4", "crossq", 100_000) == "2759 ± 379 | SimbaV2 results/baseline/crossq.csv"
    assert reference_cells("HalfCheetah-v4", "droq", 1_000_000) == "11050 | SimbaV2 results/baseline/droq_utd20.csv"
    assert reference_cells("Pendulum-v1", "sac", 20_000).startswith("-156.995 ± 88.714 | RL Zoo")
    assert reference_cells("Hopper-v4", "sac", 50_000) == "- | -"
    envs = {env for env, _ in REFERENCES}
    assert envs == {"HalfCheetah-v4", "Hopper-v4", "Walker2d-v4", "Ant-v4", "Humanoid-v4", "Pendulum-v1"}
    mujoco = envs - {"Pendulum-v1"}
    assert all(len(REFERENCES[(env, algo)]) == 3 for env in mujoco for algo in ("sac", "crossq", "droq"))


def test_report_only_without_ray_names_no_absolute_path_and_lists_unfinished_runs(tmp_path):
    """Issue 20 item 20: a report is committed, so its command and run paths are relative (the runs to the
    log folder, -f and --output to the working directory). Here with a hand-made manifest (seed 1 done in
    sac/Pendulum-v1_4, seed 2 interrupted) and without Ray: --report-only trains nothing, so needs none,
    while training exits 2 with the install command before writing anything."""
    from rlbench.bench.returns import build_parser, check_args
    from rlbench.sweep.manifest import new_manifest

    work = tmp_path / "repo"
    work.mkdir()
    log, output = tmp_path / "runs", tmp_path / "report" / "returns.md"
    argv = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "--seed-list", "1", "2", "-f", str(log)]
    argv += [f"--output={output}", "-n", "200", "--eval-freq", "100"]
    spec = check_args(build_parser().parse_args(argv[1:]))
    manifest = new_manifest(spec, "python -m rlbench.bench returns ...")
    record = manifest.cells["sac/Pendulum-v1/-/1"]
    record.state, record.run_dir, record.wall_time_s = "done", "sac/Pendulum-v1_4", 3.0
    manifest.cells["sac/Pendulum-v1/-/2"].state = "interrupted"
    manifest.save(log / "sweeps" / "returns")
    run = log / "sac" / "Pendulum-v1_4"
    run.mkdir(parents=True)
    np.savez(
        run / "evaluations.npz",
        timesteps=np.array([100, 200]),
        results=np.array([[-900.0], [-500.0]]),
        ep_lengths=np.full((2, 1), 200),
    )
    env = {**without_module(tmp_path, "ray"), "PYTHONDONTWRITEBYTECODE": "1"}  # the folder is compared

    def bench(*extra):
        command = [sys.executable, "-m", "rlbench.bench", *argv[:-4], *extra, *argv[-4:]]
        return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300)

    done = bench("--report-only")
    assert done.returncode == 0, done.stderr
    assert "2 runs: 1 finished, 1 not (--report-only" in done.stdout
    report = output.read_text()
    assert str(tmp_path) not in report and " /" not in report and "`/" not in report
    assert (
        "python -m rlbench.bench returns --algos sac --envs Pendulum-v1 --seed-list 1 2 -f ../runs "
        "--output=../report/returns.md -n 200 --eval-freq 100\n" in report
    )
    assert "Runs: `<algo>/<env>_<N>` in the log folder (-f; RL Zoo layout" in report
    assert "| sac | Pendulum-v1 | 1 | sac/Pendulum-v1_4 | 200 | -500.0 | 3 |" in report
    assert "Not trained yet (left out of the tables): sac/Pendulum-v1 seed 2" in report
    assert "| Pendulum-v1 | sac | 1 | 200 | -500.0 | -500.0 | n/a (1 seed) | - | - |" in report

    output.unlink()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    training = bench()
    assert training.returncode == 2
    assert training.stderr == 'error: sweeps run on Ray, which is not installed: pip install -e ".[sweep]"\n'
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_missing_plots_extra_exits_2_before_training(tmp_path):
    """The report draws curves: without matplotlib the grid must not train for hours and then fail."""
    done = subprocess.run(
        [sys.executable, "-m", "rlbench.bench", *grid_args(tmp_path / "logs", tmp_path / "r.md")],
        cwd=REPO_ROOT,
        env=without_module(tmp_path, "matplotlib"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: plots need the plots extra") and 'pip install -e ".[plots]"' in done.stderr
    assert sorted(os.listdir(tmp_path)) == ["stubs"]


def test_seeds_per_run_trains_consecutive_seeds_together_into_their_own_cells(tmp_path, capsys, ray_session):
    """--seeds-per-run 2 over seeds 1-3: seeds 1 and 2 in one --n-seeds 2 process, seed 3 alone; each seed's
    run gets its own run folder (its args.yml seed, its manifest entry), and a rerun skips all."""
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    argv = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "3", "-f", str(log)]
    argv += ["--output", str(output), "--seeds-per-run", "2", *TINY]
    assert bench_main(argv) == 0
    out = capsys.readouterr().out
    assert "3 cells, 3 to run in 2 processes" in out and "2 seeds per process" in out
    cells = manifest_cells(log)
    assert {cells[f"sac/Pendulum-v1/-/{seed}"]["task"].rsplit("_", 1)[1] for seed in (1, 2)} == {"s1-2"}
    assert cells["sac/Pendulum-v1/-/3"]["task"].endswith("_s3")
    for seed in (1, 2, 3):
        run_dir = cells[f"sac/Pendulum-v1/-/{seed}"]["run_dir"]
        assert yaml.safe_load((log / run_dir / "Pendulum-v1" / "args.yml").read_text())["seed"] == seed
        assert f"| sac | Pendulum-v1 | {seed} | {run_dir} | 600 |" in output.read_text()
    first = log / cells["sac/Pendulum-v1/-/1"]["run_dir"]
    assert yaml.safe_load((first / "Pendulum-v1" / "args.yml").read_text())["n_seeds"] == 2  # one 2-seed process
    assert (first / "Pendulum-v1" / "command.txt").read_text().endswith(" --seed 1 --n-seeds 1\n")  # seed 1 alone
    assert bench_main(argv) == 0
    assert "nothing to do, all 3 cells ran earlier (3 done, 0 failed)" in capsys.readouterr().out


def test_a_failing_cell_leaves_the_others_reported_and_exits_1(tmp_path, capsys, ray_session):
    """crossq's runs get a hyperparameter it does not have: its cell fails alone, with the error in the manifest
    and the report; sac's is reported; exit 1."""
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    argv = ["returns", "--algos", "sac", "crossq", "--envs", "Pendulum-v1", "--seed-list", "1", "-f", str(log)]
    argv += ["--output", str(output), *TINY, "--params-for", "crossq", "not_a_hyperparameter:1"]
    assert bench_main(argv) == 1
    cells = manifest_cells(log)
    sac, crossq = cells["sac/Pendulum-v1/-/1"], cells["crossq/Pendulum-v1/-/1"]
    assert sac["state"] == "done" and crossq["state"] == "failed" and crossq["run_dir"] is None
    assert "not_a_hyperparameter" in crossq["error"]
    report = output.read_text()
    assert f"Missing (failed) runs: crossq/Pendulum-v1 seed 1 ({crossq['error']})" in report
    assert f"| sac | Pendulum-v1 | 1 | {sac['run_dir']} | 600 |" in report and "| crossq |" not in report
    assert "failed crossq/Pendulum-v1/-/1" in capsys.readouterr().err


def test_runs_shorter_than_eval_freq_are_refused_before_anything_is_written(tmp_path, capsys):
    """Issue 44 item 8: -n 2000 with --eval-freq at its default (10000), or a -params n_timesteps below an
    --eval-freq: no run would be evaluated, and the report compares evaluations. One line, exit 2, nothing
    written (before: the whole grid trained, then "no finished run to report")."""
    base = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "2", "-f", str(tmp_path / "logs")]
    cases = [
        (["-n", "2000"], "--eval-freq 10000: longer than the sac Pendulum-v1 runs (2000 env steps)", 2000, 200),
        (["-params", "n_timesteps:3000", "--eval-freq", "5000"], "--eval-freq 5000: longer than the sac", 3000, 300),
    ]
    for extra, start, steps, tenth in cases:
        assert bench_main([*base, *extra]) == 2
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {start}"), lines
        assert lines[0].endswith(f"pass --eval-freq {steps} or less, e.g. --eval-freq {tenth} for ten points per curve")
    assert list(tmp_path.iterdir()) == []


def test_the_report_goes_to_the_sweep_folder_by_default_not_the_working_folder(tmp_path, monkeypatch):
    """Issue 44 item 8: without --output the report and its PNGs go to <-f>/sweeps/<name>/, not to
    benchmarks/returns.md under the working folder (run from a checkout, the committed report)."""
    from rlbench.bench.returns import build_parser, check_args
    from rlbench.sweep.manifest import new_manifest
    from tests.integration.test_scripts import write_evaluations

    work, log = tmp_path / "checkout", tmp_path / "runs"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seed-list", "1", "-f", str(log), "-n", "200"]
    argv += ["--eval-freq", "100", "--name", "short"]
    manifest = new_manifest(check_args(build_parser().parse_args(argv)), "python -m rlbench.bench returns ...")
    record = manifest.cells["sac/Pendulum-v1/-/1"]
    record.state, record.run_dir, record.wall_time_s = "done", "sac/Pendulum-v1_1", 3.0
    manifest.save(log / "sweeps" / "short")
    write_evaluations(log / record.run_dir, [100, 200], [-900.0, -500.0])
    assert bench_main(["returns", *argv, "--report-only"]) == 0
    assert list(work.iterdir()) == []
    report = log / "sweeps" / "short" / "returns.md"
    assert "| sac | Pendulum-v1 | 1 | sac/Pendulum-v1_1 | 200 | -500.0 | 3 |" in report.read_text()
    assert (report.parent / "returns_Pendulum-v1.png").read_bytes()[:4] == b"\x89PNG"


def test_a_ray_start_that_times_out_is_one_line_exit_1_and_leaves_nothing(tmp_path):
    """Issue 44 item 6: the private Ray instance's start timing out (here its wait for the GCS's port, set to 0 s
    through the variable Ray reads; under load the raylet's 30 s): before, Ray's 35-line traceback, exit 1 and
    the sweep folder with driver.lock left. Now one line, exit 1 (nothing was trained, and nothing says a rerun
    would do better), no sweep or log folder, nothing of Ray's left in its temp folder."""
    work, log = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    argv = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "1", "-f", str(log), *TINY]
    done = subprocess.run(
        [sys.executable, "-m", "rlbench.bench", *argv],
        cwd=work,
        env={**os.environ, "RAY_gcs_server_port_wait_time_s": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Ray did not start on this machine (RuntimeError: Timed out")
    rerun = "nothing was trained: run the same command again, on a less loaded machine if Ray timed out"
    assert lines[0].endswith(rerun)
    assert not log.exists() and list(work.iterdir()) == []
    assert os.listdir(os.environ["RAY_TMPDIR"]) == []
