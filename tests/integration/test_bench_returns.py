"""`python -m rlbench.bench returns`: a CI-sized grid, its report checked against the evaluations.npz
files by hand, resumability (finished runs skipped, interrupted runs continued) and argument errors."""

import json

import numpy as np
import pytest
import yaml

from rlbench.bench.__main__ import main as bench_main
from rlbench.bench.report import REFERENCES, Summary, reference_cells

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


def grid_args(log, output, *extra):
    return [
        "returns",
        "--algos",
        *ALGOS,
        "--envs",
        *ENVS,
        "--seeds",
        "2",
        "-f",
        str(log),
        "--output",
        str(output),
        *extra,
        *TINY,
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
    return sorted(p.relative_to(log) for p in log.rglob("*") if p.is_dir())


def test_grid_report_then_rerun_skips(tmp_path, capsys):
    log, output = tmp_path / "logs", tmp_path / "report" / "returns.md"
    junk = log / ".partial" / "sac" / "Pendulum-v1_1" / "sac" / "Pendulum-v1_1"  # as left by a killed run
    junk.mkdir(parents=True)
    (junk / "evaluations.npz").write_bytes(b"torn")

    assert bench_main(grid_args(log, output, "--at-steps", "500")) == 0
    out = capsys.readouterr().out
    assert "8 runs: 0 finished earlier, 8 to train" in out and "removing the unfinished run" in out
    assert not (log / ".partial").exists()
    report = output.read_text()
    lines = report.splitlines()
    for env in ENVS:
        for algo in ALGOS:
            runs = [log / algo / f"{env}_{seed}" for seed in (1, 2)]
            data = [np.load(run / "evaluations.npz") for run in runs]
            for d in data:
                np.testing.assert_array_equal(d["timesteps"], [200, 400, 600])
            finals = np.array([d["results"][-1].mean() for d in data])
            at_400 = np.array([d["results"][1].mean() for d in data])  # the last evaluation at or below 500
            assert f"| {env} | {algo} | 2 | 600 | {by_hand(finals)} | - | - |" in lines
            assert f"| {env} | {algo} | 2 | 400 | {by_hand(at_400)} | - | - |" in lines
            for seed, final in zip((1, 2), finals, strict=True):
                assert f"| {algo} | {env} | {seed} | {algo}/{env}_{seed} | 600 | {final:.1f} |" in report
            done = json.loads((runs[0] / "bench_done.json").read_text())["settings"]
            assert (done["n_timesteps"], done["hyperparams"]["learning_starts"]) == (600, 1000)
    for env in ENVS:
        png = output.parent / f"returns_{env}.png"
        assert f"]({png.name})" in report
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        import matplotlib.pyplot as plt

        assert plt.imread(png).shape[0] > 100  # decodes
    assert "python -m rlbench.bench returns --algos sac crossq" in report and "Machine: " in report

    folders = run_folders(log)
    stamps = {p: p.stat().st_mtime_ns for p in log.rglob("evaluations.npz")}
    assert bench_main(grid_args(log, output, "--at-steps", "500")) == 0
    out = capsys.readouterr().out
    assert "8 runs: 8 finished earlier, 0 to train" in out and out.count("finished earlier, skipped") == 8
    assert run_folders(log) == folders
    assert stamps == {p: p.stat().st_mtime_ns for p in log.rglob("evaluations.npz")}
    second = output.read_text().splitlines()
    assert [line for line in second if not line.startswith("Date: ")] == [
        line for line in lines if not line.startswith("Date: ")
    ]

    # A later step count than the runs reach: n/a. --at-steps picks a report column, not other runs.
    longer = tmp_path / "longer.md"
    assert bench_main(grid_args(log, longer, "--at-steps", "100000")) == 0
    assert "| Pendulum-v1 | sac | 2 | n/a | n/a | n/a | n/a | - | - |" in longer.read_text().splitlines()
    assert run_folders(log) == folders

    # Other settings for the same folders are refused before anything runs.
    assert bench_main([*grid_args(log, tmp_path / "other.md"), "-n", "400"]) == 2
    err = capsys.readouterr().err
    assert "sac/Pendulum-v1_1 was trained with other settings (n_timesteps: 600 there, 400 now" in err
    assert not (tmp_path / "other.md").exists() and run_folders(log) == folders


def test_params_per_algo_and_report_only(tmp_path, capsys):
    """--params-for sets one algorithm's overrides (winning over -params); --report-only reports the finished
    part of a larger grid and trains nothing, as when several invocations train disjoint seeds into one -f."""
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    common = [
        "returns",
        "--algos",
        "sac",
        "crossq",
        "--envs",
        "Pendulum-v1",
        "-f",
        str(log),
        "--output",
        str(output),
        *TINY,
        "--params-for",
        "crossq",
        "batch_size:8",
        "gamma:0.9",
    ]
    assert bench_main([*common, "--seed-list", "1"]) == 0
    settings = {
        algo: json.loads((log / algo / "Pendulum-v1_1" / "bench_done.json").read_text())["settings"]
        for algo in ("sac", "crossq")
    }
    assert (settings["sac"]["hyperparams"]["batch_size"], settings["crossq"]["hyperparams"]["batch_size"]) == (16, 8)
    assert (settings["sac"]["hyperparams"]["gamma"], settings["crossq"]["hyperparams"]["gamma"]) == (0.99, 0.9)
    assert "crossq `learning_starts:1000 policy_kwargs:dict(net_arch=[8]) batch_size:8 gamma:0.9`" in output.read_text()
    capsys.readouterr()

    folders = run_folders(log)
    partial = tmp_path / "partial.md"
    assert bench_main([*common, "--seed-list", "1", "2", "--report-only", "--output", str(partial)]) == 0
    assert "2 finished, 2 not (--report-only" in capsys.readouterr().out
    assert run_folders(log) == folders  # nothing trained
    report = partial.read_text()
    assert "Not trained yet (left out of the tables): sac/Pendulum-v1_2, crossq/Pendulum-v1_2" in report
    final = np.load(log / "crossq" / "Pendulum-v1_1" / "evaluations.npz")["results"][-1].mean()
    assert f"| Pendulum-v1 | crossq | 1 | 600 | {final:.1f} | {final:.1f} | n/a (1 seed) | - | - |" in report

    # Other per-algorithm settings are other runs: refused, as any change of settings is.
    other = [*common[:-1], "gamma:0.8", "--seed-list", "1", "--report-only"]
    assert bench_main(other) == 2
    assert "crossq/Pendulum-v1_1 was trained with other settings (gamma: 0.9 there, 0.8 now" in capsys.readouterr().err
    assert bench_main([*common, "--seed-list", "3", "--report-only"]) == 1  # no finished run of seed 3
    assert "no finished run to report" in capsys.readouterr().err
    assert run_folders(log) == folders


class StopAfter300Steps:
    """Stands in for train.py's signal handler: asks the loop to stop, as SIGTERM would, at 300 env steps
    (it is polled once per env step)."""

    def __init__(self):
        self.polls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def __call__(self):
        self.polls += 1
        return "SIGTERM" if self.polls > 300 else None


def test_interrupted_run_continues_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    args = [
        "returns",
        "--algos",
        "sac",
        "--envs",
        "Pendulum-v1",
        "--seed-list",
        "7",
        "-f",
        str(log),
        "--output",
        str(output),
        "-n",
        "600",
        "--eval-freq",
        "100",
        "--eval-episodes",
        "1",
        "-params",
        "learning_starts:400",
        "policy_kwargs:dict(net_arch=[8])",
        "batch_size:16",
    ]
    with monkeypatch.context() as patch:
        patch.setattr("rlbench.cli.train.StopRequest", StopAfter300Steps)
        assert bench_main(args) == 75
    assert "run the same command again to continue" in capsys.readouterr().err
    assert not (log / "sac").exists() and not output.exists()
    assert (log / ".partial/sac/Pendulum-v1_7/sac/Pendulum-v1_1/rl_model_300_steps.zip").is_file()

    assert bench_main(args) == 0
    assert "continuing the interrupted run from" in capsys.readouterr().out
    run = log / "sac" / "Pendulum-v1_7"
    np.testing.assert_array_equal(np.load(run / "evaluations.npz")["timesteps"], [100, 200, 300, 400, 500, 600])
    assert " -i " in (run / "Pendulum-v1" / "command.txt").read_text()
    assert json.loads((run / "bench_done.json").read_text())["resumed_from"].endswith("rl_model_300_steps.zip")
    assert not (log / ".partial").exists()
    assert "| Pendulum-v1 | sac | 1 | 600 |" in output.read_text()


@pytest.mark.parametrize(
    ("flag", "bad", "expected"),
    [
        ("--algos", "sacc", "unknown algorithm 'sacc'; did you mean 'sac'? (valid: sac, droq, crossq)"),
        ("--envs", "Pendulum-v9", "environment 'Pendulum-v9' not found"),
        ("--params-for", "droq", "--params-for droq: not one of --algos (sac)"),
        ("--params-for", "sac", "--params-for sac: expected KEY:VALUE overrides after the algorithm"),
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


def test_report_names_no_absolute_path(tmp_path, capsys, monkeypatch):
    """Issue 20 item 20: a report is committed, so its command and run paths are relative (the runs to the
    log folder, -f and --output to the working directory); here with a hand-made finished run."""
    from rlbench.bench.returns import DONE_FILE, build_parser, check_args, resolve_settings

    work = tmp_path / "repo"
    work.mkdir()
    monkeypatch.chdir(work)
    log, output = tmp_path / "runs", tmp_path / "report" / "returns.md"
    argv = [
        "returns",
        "--algos",
        "sac",
        "--envs",
        "Pendulum-v1",
        "--seed-list",
        "1",
        "-f",
        str(log),
        f"--output={output}",
        "-n",
        "200",
        "--eval-freq",
        "100",
        "--report-only",
    ]
    args = build_parser().parse_args(argv[1:])
    (cell,) = check_args(args)
    run = cell.folder(log)
    run.mkdir(parents=True)
    np.savez(
        run / "evaluations.npz",
        timesteps=np.array([100, 200]),
        results=np.array([[-900.0], [-500.0]]),
        ep_lengths=np.full((2, 1), 200),
    )
    (run / DONE_FILE).write_text(json.dumps({"settings": resolve_settings([cell], args)[cell], "wall_time_s": 3}))

    assert bench_main(argv) == 0
    report = output.read_text()
    assert str(tmp_path) not in report and " /" not in report and "`/" not in report
    assert (
        "python -m rlbench.bench returns --algos sac --envs Pendulum-v1 --seed-list 1 -f ../runs "
        "--output=../report/returns.md -n 200" in report
    )
    assert "Runs: `<algo>/<env>_<seed>` in the log folder (-f; RL Zoo layout)" in report
    assert "| sac | Pendulum-v1 | 1 | sac/Pendulum-v1_1 | 200 | -500.0 | 3 |" in report


def test_missing_plots_extra_exits_2_before_training(tmp_path):
    """The report draws curves: without matplotlib the grid must not train for hours and then fail."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from tests.integration.test_scripts import without_module

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


def test_seeds_per_run_trains_consecutive_seeds_together_into_their_own_cells(tmp_path, capsys):
    """--seeds-per-run 2 over seeds 1-3: seeds 1 and 2 in one train.py --n-seeds 2 run, seed 3 alone; each
    seed's run lands in its own cell folder (its args.yml seed, its bench_done.json), and a rerun skips all."""
    log, output = tmp_path / "logs", tmp_path / "returns.md"
    argv = ["returns", "--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "3", "-f", str(log)]
    argv += ["--output", str(output), "--seeds-per-run", "2", *TINY]
    assert bench_main(argv) == 0
    out = capsys.readouterr().out
    assert "[2/3] sac Pendulum-v1 seeds 1-2: training" in out and "[3/3] sac Pendulum-v1 seed 3: training" in out
    assert not (log / ".partial").exists()
    for seed in (1, 2, 3):
        run = log / "sac" / f"Pendulum-v1_{seed}"
        assert yaml.safe_load((run / "Pendulum-v1" / "args.yml").read_text())["seed"] == seed
        assert json.loads((run / "bench_done.json").read_text())["settings"]["seed"] == seed
        assert f"| sac | Pendulum-v1 | {seed} | sac/Pendulum-v1_{seed} | 600 |" in output.read_text()
    assert "--n-seeds" in (log / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "command.txt").read_text()
    assert bench_main(argv) == 0
    assert capsys.readouterr().out.count("finished earlier, skipped") == 3
