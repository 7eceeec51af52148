"""scripts/run_seeds.sh and the plot script, end to end on tiny runs."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from rlbench.report.plots import main as plots_main
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("seeds_per_run", ["1", "3"])
def test_seed_sweep_then_plots_and_table(tmp_path, capsys, seeds_per_run):
    """The bash loop (engine=bash, with Ray installed too): three seeds as three train.py runs, or as one run
    of three vmapped seeds: the same three run folders."""
    logs = tmp_path / "logs"
    env = {**os.environ, "envs": "Pendulum-v1", "seeds": "1 2 3", "PYTHON": sys.executable, "engine": "bash"}
    env["seeds_per_run"] = seeds_per_run
    done = subprocess.run(
        [
            "bash",
            "scripts/run_seeds.sh",
            "--algo",
            "sac",
            "-n",
            "60",
            "--eval-freq",
            "30",
            "--eval-episodes",
            "1",
            "--verbose",
            "0",
            "-f",
            str(logs),
            "-params",
            "learning_starts:1000",
            "policy_kwargs:dict(net_arch=[8])",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"finished {3 // int(seeds_per_run)}" in done.stdout and "failed 0" in done.stdout
    assert "rlbench.sweep" not in done.stdout and not (logs / "sweeps").exists()
    runs = sorted((logs / "sac").glob("Pendulum-v1_*"))
    assert len(runs) == 3
    seeds = [yaml.safe_load((run / "Pendulum-v1" / "args.yml").read_text())["seed"] for run in runs]
    assert sorted(seeds) == [1, 2, 3]

    out = tmp_path / "plots"
    assert plots_main([str(logs), "-o", str(out), "--table", str(tmp_path / "table.md")]) == 0
    png = out / "Pendulum-v1.png"
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    finals = np.array([np.load(r / "evaluations.npz")["results"][-1].mean() for r in runs])
    row = (tmp_path / "table.md").read_text().splitlines()[2]
    expected_se = finals.std(ddof=1) / np.sqrt(3)
    assert (
        f"| Pendulum-v1 | sac | 3 | 60 | {finals.mean():.1f} +/- {expected_se:.1f} | "
        f"{stats.trim_mean(finals, 0.25):.1f} |" == row
    )


def test_without_ray_the_loop_runs_and_reports_failed_runs(tmp_path):
    env = {**without_module(tmp_path, "ray"), "envs": "Pendulm-v1", "seeds": "1", "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", "scripts/run_seeds.sh", "-f", str(tmp_path), "--verbose", "0"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "failed 1: Pendulm-v1/1 (exit 2)" in done.stdout
    assert "=== Pendulm-v1 seed 1: " in done.stdout and "rlbench.sweep" not in done.stdout


def test_parallel_sweep_pins_each_slot_and_keeps_logs(tmp_path):
    # PYTHON is a wrapper that prints the CPU affinity train.py starts with, so pinning is seen, not assumed.
    wrapper = tmp_path / "python.sh"
    show_affinity = "import os; print('affinity', sorted(os.sched_getaffinity(0)))"
    wrapper.write_text(f'#!/bin/sh\n{sys.executable} -c "{show_affinity}"\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    logs = tmp_path / "sweeps"
    env = {
        **os.environ,
        "envs": "Pendulum-v1 Pendulm-v1",
        "seeds": "1 2",
        "jobs": "2",
        "sweep_logs": str(logs),
        "PYTHON": str(wrapper),
        "engine": "bash",
    }
    done = subprocess.run(
        [
            "bash",
            "scripts/run_seeds.sh",
            "--algo",
            "sac",
            "-n",
            "60",
            "--eval-freq",
            "30",
            "--eval-episodes",
            "1",
            "--verbose",
            "0",
            "-f",
            str(tmp_path / "runs"),
            "-params",
            "learning_starts:1000",
            "policy_kwargs:dict(net_arch=[8])",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the misspelt env's two runs fail, the others finish
    assert "finished 2:" in done.stdout and "Pendulum-v1/1" in done.stdout and "Pendulum-v1/2" in done.stdout
    assert "failed 2:" in done.stdout and "Pendulm-v1/1 (exit 2)" in done.stdout
    assert sorted(p.name for p in (tmp_path / "runs" / "sac").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]
    cores = os.cpu_count()
    affinity = {}
    for run in ("Pendulum-v1_seed1", "Pendulum-v1_seed2", "Pendulm-v1_seed1", "Pendulm-v1_seed2"):
        text = (logs / f"{run}.log").read_text()
        affinity[run] = text.splitlines()[0]
        if run.startswith("Pendulm"):
            assert "not found in the gymnasium registry" in text

    # Runs alternate between the two slots (seed 1 -> slot 0, seed 2 -> slot 1 for each env); slot k holds
    # cores [k*C/2, (k+1)*C/2): on a 2-core machine core 0 and core 1; on one core both share core 0.
    def slot_cores(k):
        first, last = k * cores // 2 % cores, ((k + 1) * cores // 2 - 1) % cores
        return list(range(first, max(first, last) + 1))

    slot0, slot1 = slot_cores(0), slot_cores(1)
    assert (slot0, slot1) == ([0], [1]) or cores != 2
    assert affinity["Pendulum-v1_seed1"] == affinity["Pendulm-v1_seed1"] == f"affinity {slot0}"
    assert affinity["Pendulum-v1_seed2"] == affinity["Pendulm-v1_seed2"] == f"affinity {slot1}"


@pytest.mark.parametrize(
    "settings,flags,message",
    [
        ({"jobs": "two"}, [], "jobs=two: expected a positive integer"),
        ({"seeds_per_run": "2", "seeds": "1 2 3"}, [], "the 3 seeds (1 2 3) do not split into runs of 2"),
        ({"seeds_per_run": "2", "seeds": "1 3"}, [], "seeds 1 3 are not consecutive"),
        ({"engine": "ray"}, [], "engine=ray: expected auto (the sweep when Ray is installed, else the bash loop)"),
        (
            {"engine": "sweep"},
            ["--algo", "sac", "--verbose", "0"],
            "--verbose: not a flag the sweep engine maps (run_seeds.sh's header lists them); run it with "
            "engine=bash ./scripts/run_seeds.sh ...",
        ),
        ({"engine": "sweep", "envs": "Pendulm-v1"}, [], "error: environment 'Pendulm-v1' not found"),
    ],
)
def test_sweep_refuses_bad_settings_before_running(tmp_path, settings, flags, message):
    env = {**os.environ, **settings, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", "scripts/run_seeds.sh", *flags, "-f", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and message in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # 18 s on CI's 2 cores: a Ray instance of its own; the sweep itself is tested in the default run
def test_with_ray_run_seeds_drives_a_sweep(tmp_path):
    """With Ray installed (engine=auto), the same command line becomes one `python -m rlbench.sweep`: its
    manifest records both cells done with the packing jobs=<cores> asks for (one core each), each seed in its
    own run folder; the same command again trains nothing."""
    logs = tmp_path / "logs"
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must fit in 107 bytes
    jobs = str(len(os.sched_getaffinity(0)))  # as nproc counts the cores
    env = {**os.environ, "envs": "Pendulum-v1", "seeds": "1 2", "jobs": jobs, "PYTHON": sys.executable}
    env["RAY_TMPDIR"] = ray_tmp
    flags = ["--algo", "sac", "-n", "300", "--eval-freq=300", "--eval-episodes", "2", "-f", str(logs), "-params"]
    flags += ["learning_starts:100", "batch_size:8", "buffer_size:1000", "policy_kwargs:dict(net_arch=[16])"]
    try:
        runs = [
            subprocess.run(
                ["bash", "scripts/run_seeds.sh", *flags],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            for _ in range(2)
        ]
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    first, again = runs
    assert first.returncode == 0, first.stdout + first.stderr
    assert (
        "-m rlbench.sweep --envs Pendulum-v1 --seed-list 1 2 --seeds-per-process 1 --cpus-per-run 1 --algos sac "
        "-n 300 --eval-freq 300 --eval-episodes 2 -f" in first.stdout
    )
    manifest = json.loads((logs / "sweeps" / "sac_Pendulum-v1" / "manifest.json").read_text())
    packing = manifest["packing"]
    assert (packing["seeds_per_process"], packing["cpus_per_run"], packing["pinned"]) == (1, 1, True)
    assert manifest["grid"]["params"] == flags[-4:] and manifest["grid"]["n_timesteps"] == 300
    cells = manifest["cells"]
    assert sorted(cells) == ["sac/Pendulum-v1/-/1", "sac/Pendulum-v1/-/2"]
    for seed in (1, 2):
        record = cells[f"sac/Pendulum-v1/-/{seed}"]
        assert record["state"] == "done"
        args = yaml.safe_load((logs / record["run_dir"] / "Pendulum-v1" / "args.yml").read_text())
        assert (args["seed"], args["n_timesteps"], args["eval_freq"]) == (seed, 300, 300)
    assert (logs / "sweeps" / "sac_Pendulum-v1" / "report.md").is_file()
    assert again.returncode == 0 and "nothing to do, all 2 cells ran earlier" in again.stdout
    assert sorted(p.name for p in (logs / "sac").iterdir()) == ["Pendulum-v1_1", "Pendulum-v1_2"]


def write_evaluations(run, timesteps, returns):
    """An evaluations.npz as train.py writes it: two episodes per evaluation, whose mean is `returns`."""
    run.mkdir(parents=True)
    returns = np.asarray(returns, dtype=float)
    np.savez(
        run / "evaluations.npz",
        timesteps=np.asarray(timesteps),
        results=np.stack([returns - 1, returns + 1], 1),
        ep_lengths=np.full((len(timesteps), 2), 200),
    )


def test_runs_evaluated_at_different_steps_are_aligned_by_env_steps(tmp_path, capsys):
    """The issue's case: runs at [1000, 2000, 3000] and [500, 1000] share only env step 1000, where the
    mean is (1 + 20) / 2 = 10.5; cutting by evaluation index would have averaged 2 and 20 'at 2000'."""
    write_evaluations(tmp_path / "logs" / "sac" / "Pendulum-v1_1", [1000, 2000, 3000], [1, 2, 3])
    write_evaluations(tmp_path / "logs" / "sac" / "Pendulum-v1_2", [500, 1000], [10, 20])
    assert plots_main([str(tmp_path / "logs"), "-o", str(tmp_path / "plots")]) == 0
    captured = capsys.readouterr()
    assert "| Pendulum-v1 | sac | 2 | 1000 | 10.5 +/- 9.5 | 10.5 |" in captured.out
    assert (
        "warning: Pendulum-v1 sac: runs cover different env-step ranges (Pendulum-v1_1 1000-3000, "
        "Pendulum-v1_2 500-1000); kept only 1000-1000, the env steps every run reached"
    ) in captured.err


def test_runs_between_each_others_evaluations_are_interpolated_by_hand(tmp_path, capsys):
    from rlbench.report.plots import load_group

    first, second = tmp_path / "Pendulum-v1_1", tmp_path / "Pendulum-v1_2"
    write_evaluations(first, [1000, 2000, 3000], [1, 2, 3])
    write_evaluations(second, [500, 1500, 2500], [10, 20, 30])
    group = load_group("Pendulum-v1", "sac", [first, second])
    # Common range 1000-2500, on both runs' points there. First run at 1500 and 2500: 1.5, 2.5 (halfway);
    # second at 1000: halfway between 10 (500) and 20 (1500) = 15, at 2000: 25.
    np.testing.assert_array_equal(group.timesteps, [1000, 1500, 2000, 2500])
    np.testing.assert_allclose(group.returns, [[1, 1.5, 2, 2.5], [15, 20, 25, 30]])
    np.testing.assert_allclose(group.returns.mean(axis=0), [8, 10.75, 13.5, 16.25])
    assert group.interpolated
    same = load_group("Pendulum-v1", "sac", [first, first])
    assert not same.interpolated and capsys.readouterr().err.count("warning: ") == 1
    from rlbench.report.plots import markdown_table

    assert "| Pendulum-v1 | sac | 2 | 2500 (interpolated) | 16.2 +/- 13.8 |" in markdown_table([group])


def test_a_missing_log_folder_is_one_line_exit_2(tmp_path, capsys):
    write_evaluations(tmp_path / "logs" / "sac" / "Pendulum-v1_1", [1000], [1])
    code = plots_main([str(tmp_path / "logs"), str(tmp_path / "lgos"), "-o", str(tmp_path / "plots")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == f"error: log folder not found: {tmp_path / 'lgos'}\n"
    assert not (tmp_path / "plots").exists()


def without_module(tmp_path, name):
    """Environment for a subprocess in which `import name` fails as when the package is not installed:
    a module of that name first on PYTHONPATH raises ImportError."""
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / f"{name}.py").write_text(f"raise ImportError(\"No module named '{name}'\", name='{name}')\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(stubs), REPO_ROOT])}


def test_plots_without_matplotlib_exit_2_with_the_install_command_before_any_output(tmp_path):
    write_evaluations(tmp_path / "logs" / "sac" / "Pendulum-v1_1", [1000], [1])
    done = subprocess.run(
        [
            sys.executable,
            "scripts/plot_results.py",
            str(tmp_path / "logs"),
            "-o",
            str(tmp_path / "plots"),
            "--table",
            str(tmp_path / "table.md"),
        ],
        cwd=REPO_ROOT,
        env=without_module(tmp_path, "matplotlib"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.startswith(
            "error: plots need the plots extra (No module named 'matplotlib'): pip install -e \".[plots]\""
        )
        and done.stderr.count("\n") == 1
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "stubs"]


def forge_evaluations(run, kind):
    """An evaluations.npz that rlbench never writes: `kind` says how it is wrong."""
    import io
    import zipfile

    run.mkdir(parents=True)
    path = run / "evaluations.npz"
    if kind == "not a zip":
        path.write_bytes(b"PK but not a zip at all")
    elif kind == "no results":
        np.savez(path, timesteps=np.array([1000]))
    elif kind == "1-D results":
        np.savez(path, timesteps=np.array([1000]), results=np.array([1.0]))
    else:  # a few hundred deflated bytes whose .npy header, or whose zip entry, declares 3 GB
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (3 << 27,)})
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("timesteps.npy", header.getvalue() + bytes(64))
            archive.writestr("results.npy", header.getvalue() + bytes(64))
        if kind == "3 GB entry":  # the central directory's uncompressed size of the first member, forged
            data = bytearray(path.read_bytes())
            entry = data.index(b"PK\x01\x02")
            data[entry + 24 : entry + 28] = (3 * 10**9).to_bytes(4, "little")
            path.write_bytes(bytes(data))
    return path


def test_a_forged_evaluations_npz_is_left_out_with_a_warning_naming_it_and_the_others_are_plotted(tmp_path, capsys):
    """Issue 32, item 12: each of these was a traceback that lost the whole table and plot."""
    logs = tmp_path / "logs"
    write_evaluations(logs / "sac" / "Pendulum-v1_1", [1000, 2000], [1, 3])
    kinds = ("not a zip", "no results", "1-D results", "3 GB header", "3 GB entry")
    forged = [forge_evaluations(logs / "sac" / f"Pendulum-v1_{i}", kind) for i, kind in enumerate(kinds, 2)]
    assert plots_main([str(logs), "-o", str(tmp_path / "plots")]) == 0
    captured = capsys.readouterr()
    assert "| Pendulum-v1 | sac | 1 | 2000 | 3.0 +/- 0.0 |" in captured.out
    assert (tmp_path / "plots" / "Pendulum-v1.png").stat().st_size > 1000
    warnings = captured.err.splitlines()
    assert len(warnings) == len(forged), captured.err
    for path, line in zip(forged, warnings, strict=True):
        assert line.startswith(f"warning: {path}: unreadable (") and line.endswith("); left out"), line
    assert "declares 3000000000 bytes" in warnings[-1] and "declares (402653184,) float64" in warnings[-2]


def write_config(run, env, hyperparams, zoo=False):
    """The run's config.yml: rlbench's sorted mapping, or RL Zoo's, as RL Zoo writes it: yaml.dump of an
    OrderedDict (a Python tag, then the constructor's arguments: one list of [key, value] pairs)."""
    (run / env).mkdir()
    text = yaml.safe_dump(hyperparams, sort_keys=True)
    if zoo:
        text = yaml.dump(OrderedDict(sorted(hyperparams.items())))
        assert text.startswith("!!python/object/apply:collections.OrderedDict\n- - - ")
    (run / env / "config.yml").write_text(text)


@pytest.fixture
def legends(monkeypatch):
    """{PNG file name: its legend's labels}, recorded as each figure is saved (the figure itself is saved)."""
    from matplotlib.figure import Figure

    seen, save = {}, Figure.savefig

    def recording(figure, path, *args, **kwargs):
        seen[Path(path).name] = figure.axes[0].get_legend_handles_labels()[1]
        return save(figure, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording)
    return seen


def test_two_folders_of_one_algo_and_env_are_two_curves_named_by_their_labels(tmp_path, capsys, legends):
    """Issue 35 item 5: an SBX folder and an rlbench folder were pooled into one "sac (n=4)" curve."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for i, value in enumerate((1.0, 2.0, 3.0), 1):
        write_evaluations(ours / "sac" / f"Pendulum-v1_{i}", [1000, 2000], [value, value + 10])
        write_evaluations(theirs / "sac" / f"Pendulum-v1_{i}", [1000, 2000], [value, value + 20])
        write_config(theirs / "sac" / f"Pendulum-v1_{i}", "Pendulum-v1", {"batch_size": 256}, zoo=True)
    argv = [str(ours), str(theirs), "-l", "rlbench", "SBX", "-o", str(tmp_path / "plots"), "--reps", "50"]
    assert plots_main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""  # RL Zoo's config.yml read: no "unreadable" warning, one setting for SBX's runs
    assert "| Pendulum-v1 | rlbench sac | 3 | 2000 | 12.0 +/- 0.6 | 12.0 |" in out
    assert "| Pendulum-v1 | SBX sac | 3 | 2000 | 22.0 +/- 0.6 | 22.0 |" in out
    assert "- rlbench sac vs SBX sac on Pendulum-v1 at 2k: P(improvement) 0.00 [0.00, 0.00], SBX sac better" in out
    assert legends["Pendulum-v1.png"] == ["rlbench sac (n=3)", "SBX sac (n=3)"]
    assert (tmp_path / "plots" / "performance_profile.png").read_bytes()[:4] == b"\x89PNG"
    assert plots_main([str(ours), str(theirs), "-o", str(tmp_path / "plots"), "--reps", "50"]) == 0
    assert "| Pendulum-v1 | ours sac | 3 |" in capsys.readouterr().out  # no labels: the folders' names


def test_runs_of_different_hyperparameters_in_one_folder_are_a_curve_each_naming_the_key(tmp_path, capsys, legends):
    logs = tmp_path / "logs"
    for i, (rate, value) in enumerate(((0.001, 1.0), (0.0003, 5.0), (0.001, 2.0)), 1):
        run = logs / "sac" / f"Pendulum-v1_{i}"
        write_evaluations(run, [1000], [value])
        write_config(run, "Pendulum-v1", {"batch_size": 256, "learning_rate": rate, "n_timesteps": 1000})
    forged = logs / "sac" / "Pendulum-v1_4"
    write_evaluations(forged, [1000], [7.0])
    (forged / "Pendulum-v1").mkdir()
    (forged / "Pendulum-v1" / "config.yml").write_text("{[")
    assert plots_main([str(logs), "-o", str(tmp_path / "plots"), "--reps", "50"]) == 0
    captured = capsys.readouterr()
    assert "| Pendulum-v1 | sac learning_rate=0.001 | 2 | 1000 | 1.5 +/- 0.5 | 1.5 |" in captured.out
    assert "| Pendulum-v1 | sac learning_rate=0.0003 | 1 | 1000 | 5.0 +/- 0.0 | 5.0 |" in captured.out
    assert "| Pendulum-v1 | sac config.yml unknown | 1 | 1000 | 7.0 +/- 0.0 | 7.0 |" in captured.out
    assert captured.err.startswith(f"warning: {forged / 'Pendulum-v1' / 'config.yml'}: unreadable (invalid YAML at ")
    assert captured.err.endswith("); its run's setting is unknown\n") and captured.err.count("\n") == 1
    assert legends["Pendulum-v1.png"] == [
        "sac learning_rate=0.001 (n=2)",
        "sac learning_rate=0.0003 (n=1)",
        "sac config.yml unknown (n=1)",
    ]


def test_runs_on_different_evaluation_schedules_warn_naming_them_and_are_each_plotted(tmp_path, capsys, legends):
    """Issue 35 items 5 and 6: runs sharing no evaluated env steps lost their env; now a curve each, with a
    one-line warning naming the runs. Runs over the same range at other points: a warning, one curve."""
    logs = tmp_path / "logs"
    write_evaluations(logs / "sac" / "Pendulum-v1_1", [1000, 2000], [1, 2])
    write_evaluations(logs / "sac" / "Pendulum-v1_2", [3000, 4000], [3, 4])
    write_evaluations(logs / "sac" / "Hopper-v4_1", [1000, 2000, 3000], [1, 2, 3])
    write_evaluations(logs / "sac" / "Hopper-v4_2", [1000, 1500, 3000], [1, 2, 3])
    assert plots_main([str(logs), "-o", str(tmp_path / "plots"), "--reps", "50"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "warning: Hopper-v4 sac: runs evaluated at different env steps (Hopper-v4_1 (3 evaluations), Hopper-v4_2 "
        "(3 evaluations)); interpolated to the union of their points",
        "warning: Pendulum-v1 sac: runs share no evaluated env steps (Pendulum-v1_1 1000-2000, Pendulum-v1_2 "
        "3000-4000); one curve per evaluation schedule",
    ]
    assert "| Pendulum-v1 | sac evaluated 1000-2000 | 1 | 2000 | 2.0 +/- 0.0 |" in captured.out
    assert "| Pendulum-v1 | sac evaluated 3000-4000 | 1 | 4000 | 4.0 +/- 0.0 |" in captured.out
    assert "| Hopper-v4 | sac | 2 | 3000 (interpolated) |" in captured.out
    assert legends["Pendulum-v1.png"] == ["sac evaluated 1000-2000 (n=1)", "sac evaluated 3000-4000 (n=1)"]


def test_labels_not_one_per_folder_are_one_line_exit_2(tmp_path, capsys):
    write_evaluations(tmp_path / "a" / "sac" / "Pendulum-v1_1", [1000], [1])
    write_evaluations(tmp_path / "b" / "sac" / "Pendulum-v1_1", [1000], [1])
    code = plots_main([str(tmp_path / "a"), str(tmp_path / "b"), "-l", "rlbench", "-o", str(tmp_path / "plots")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == (
        "error: -l/--labels: 1 label(s) for 2 folder(s); give one label per folder, in the folders' order\n"
    )
    assert not (tmp_path / "plots").exists()
    code = plots_main([str(tmp_path / "a"), str(tmp_path / "b"), "-l", "x", "x", "-o", str(tmp_path / "plots")])
    assert code == 2 and capsys.readouterr().err == "error: -l/--labels: 'x' given twice; each folder needs its own\n"
    assert not (tmp_path / "plots").exists()


PEER_MODULES = ("sbx", "stable_baselines3", "rl_zoo3")  # the peer's venv has them; rlbench's has not


@pytest.mark.parametrize("script", sorted(path.name for path in (Path(REPO_ROOT) / "benchmarks").glob("*.py")))
def test_every_benchmark_script_imports_what_rlbench_has_today(script):
    """The committed benchmarks import rlbench's modules by name: one renamed or moved breaks them silently
    (three did, after bench/row.py was split from bench/speed.py). Each imports here without running; the
    peer's scripts, which run in the peer's venv and import no rlbench, are only checked for that."""
    path = Path(REPO_ROOT) / "benchmarks" / script
    source = path.read_text()
    if any(f"import {name}" in source or f"from {name} " in source for name in PEER_MODULES):
        assert not re.search(r"^\s*(from|import) rlbench\b", source, re.M), script
        return
    assert 'if __name__ == "__main__":' in source  # importing it runs nothing
    done = subprocess.run(
        [sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r}, run_name='imported')"],
        cwd=REPO_ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
