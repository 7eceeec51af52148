"""The sweep's report over hand-made runs (no training): a grid axis is answered by rliable's comparison; what
files say (config.yml, the sweep's manifest, a peer cell's outcome) is shown in reports as text."""

import json
import os
import re
import subprocess
import sys

import pytest

from rlbench.errors import ConfigError
from rlbench.sweep import command as sweep_cli
from rlbench.sweep.manifest import DONE, FAILED, MANIFEST_FILE, load_manifest, new_manifest
from rlbench.sweep.report import write_sweep_report
from tests.conftest import REPO_ROOT
from tests.integration.test_scripts import write_config, write_evaluations


def test_a_grid_axis_is_answered_by_the_probability_of_improvement_of_its_settings(tmp_path):
    """Issue 35 items 2 and 3: `--grid KEY:A,B` gives one curve per setting, and the report says in words
    which setting learns better (here gamma=0.99's three runs beat every run of gamma=0.9)."""
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "3", "--grid", "gamma:0.9,0.99", "-n", "2000"]
    spec = sweep_cli.spec_from_args(sweep_cli.build_parser().parse_args([*argv, "-f", str(tmp_path)]))
    manifest = new_manifest(spec, "python -m rlbench.sweep ...")
    for i, cell in enumerate(spec.cells(), 1):
        record = manifest.cells[cell.key]
        record.state, record.run_dir, record.node, record.attempts = DONE, f"sac/Pendulum-v1_{i}", "n", 1
        final = -1000.0 + 10 * i + (500.0 if cell.setting_label == "gamma=0.99" else 0.0)
        write_evaluations(tmp_path / record.run_dir, [1000, 2000], [final - 100, final])
    report = write_sweep_report(spec, manifest, tmp_path / "sweeps" / spec.name, tmp_path, 1000).read_text()
    lines = report.splitlines()
    # Final returns: gamma=0.9 -990, -980, -970 (cells 1-3), gamma=0.99 -460, -450, -440 (cells 4-6).
    assert "| Pendulum-v1 | sac gamma=0.9 | 3 | 2000 | -980.0 | -980.0 | (-990.0, -970.0) | - | - |" in lines
    assert "| Pendulum-v1 | sac gamma=0.99 | 3 | 2000 | -450.0 [-460.0, -440.0] | -450.0 [-460.0, -440.0] |" in lines
    assert (
        "- sac gamma=0.9 vs sac gamma=0.99 on Pendulum-v1 at 2k: P(improvement) 0.00 [0.00, 0.00], "
        "sac gamma=0.99 better"
    ) in lines
    assert "| sac gamma=0.99 | Pendulum-v1 | 1 | sac/Pendulum-v1_4 | n | 1 | -460.0 | 0 |" in lines
    profile = tmp_path / "sweeps" / spec.name / "report_performance_profile.png"
    assert "![performance profile](report_performance_profile.png)" in report
    assert profile.read_bytes()[:4] == b"\x89PNG"


# Issue 44 item 5: values files supply (a run's config.yml, a sweep manifest's node and error, a peer cell's
# peer_cell.json) reached the reports as markdown and HTML. Each forged value holds FORGED, so that what it
# could have become (a heading, a list item) is found by that word.
IMG = "<img src=x onerror=alert(1)>"


def assert_shown_as_text(markdown: str) -> None:
    """Each table's rows have its header's cells, and no forged value became HTML, a link, a heading or a
    list item."""
    lines = markdown.splitlines()
    header = None
    for line in lines:
        header = (header or line) if line.startswith("|") else None
        assert header is None or line.count("|") == header.count("|"), f"{line!r} in a table of {header!r}"
    assert "<img" not in markdown and "](http" not in markdown and "$x" not in markdown
    blocks = [line for line in lines if "FORGED" in line and re.match(r"\s*(#|\[|[-+*] +[#\[]|\d+[.)] )", line)]
    assert blocks == []
    assert "FORGED" in markdown  # shown, as text


def test_a_forged_config_yml_reaches_the_plots_table_as_text_through_its_command_line(tmp_path):
    logs = tmp_path / "logs"
    policies = ["MlpPolicy", f"x|{IMG}", "x\n# FORGED heading\n[a](http://e)", "$x^$ FORGED"]
    for i, policy in enumerate(policies, 1):
        run = logs / "sac" / f"Pendulum-v1_{i}"
        write_evaluations(run, [1000, 2000], [i, 10 * i])
        write_config(run, "Pendulum-v1", {"batch_size": 256, "policy": policy})
    table, plotted = tmp_path / "table.md", tmp_path / "plots"
    command = [sys.executable, "-m", "rlbench.report.plots", str(logs), "-o", str(plotted), "--table", str(table)]
    done = subprocess.run(
        [*command, "--reps", "50"],
        cwd=REPO_ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr  # `$x^$` in a legend: no figure drawn before
    markdown = table.read_text()
    assert markdown in done.stdout
    assert_shown_as_text(markdown)
    lines = markdown.splitlines()
    assert "| Pendulum-v1 | sac policy=MlpPolicy | 1 | 2000 | 10.0 +/- 0.0 | 10.0 |" in lines
    assert (
        "| Pendulum-v1 | sac policy=x&#124;&lt;img src=x onerror=alert(1)&gt; | 1 | 2000 | 20.0 +/- 0.0 | 20.0 |"
        in lines
    )
    assert (
        "| Pendulum-v1 | sac policy=x\\n# FORGED heading\\n[a]&#40;http://e) | 1 | 2000 | 30.0 +/- 0.0 | 30.0 |"
        in lines
    )
    assert "| Pendulum-v1 | sac policy=&#36;x^&#36; FORGED | 1 | 2000 | 40.0 +/- 0.0 | 40.0 |" in lines
    assert sorted(path.name for path in plotted.iterdir()) == ["Pendulum-v1.png", "performance_profile.png"]


def forged_sweep_report(tmp_path, forge):
    """A two-seed sweep's manifest (seed 1 done, seed 2 failed) saved, `forge(cells)` applied to its JSON,
    read back by load_manifest and reported; the report's text."""
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "2", "-n", "2000", "--name", "f"]
    spec = sweep_cli.spec_from_args(sweep_cli.build_parser().parse_args([*argv, "-f", str(tmp_path)]))
    manifest = new_manifest(spec, "python -m rlbench.sweep ...")
    first, second = (manifest.cells[cell.key] for cell in spec.cells())
    first.state, first.run_dir, first.node, first.attempts = DONE, "sac/Pendulum-v1_1", "n", 1
    second.state, second.error, second.attempts = FAILED, "diverged", 1
    write_evaluations(tmp_path / first.run_dir, [1000, 2000], [-900.0, -800.0])
    folder = tmp_path / "sweeps" / "f"
    manifest.save(folder)
    data = json.loads((folder / MANIFEST_FILE).read_text())
    forge(data)
    (folder / MANIFEST_FILE).write_text(json.dumps(data))
    manifest = load_manifest(folder / MANIFEST_FILE, spec)
    return write_sweep_report(spec, manifest, folder, tmp_path, 1000).read_text()


def test_a_forged_manifest_node_error_and_packing_reach_the_sweep_report_as_text(tmp_path):
    def forge(data):
        first, second = data["cells"].values()
        first["node"] = f"# FORGED|{IMG}"
        second["error"] = f"[FORGED](http://e) |{IMG}"
        data["packing"] = {"reason": f"- FORGED {IMG}"}

    report = forged_sweep_report(tmp_path, forge)
    assert_shown_as_text(report)
    assert "| sac | Pendulum-v1 | 1 | sac/Pendulum-v1_1 | \\# FORGED&#124;&lt;img src=x" in report
    assert "Failed cells (left out): sac/Pendulum-v1/-/2 ([FORGED]&#40;http://e) &#124;&lt;img src=x" in report
    assert "Packing: \\- FORGED &lt;img src=x onerror=alert(1)&gt;." in report


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("node", "n\n# FORGED heading", "node must be one line of at most 300 characters"),
        ("error", "x\x1b]0;owned\x07", "error must be one line of at most 1000 characters"),
        ("error", "x" * 1001, "error must be one line of at most 1000 characters"),
    ],
    ids=["node with a newline", "error with escape sequences", "error too long"],
)
def test_a_manifest_node_or_error_that_is_not_one_bounded_line_is_refused_by_name(tmp_path, key, value, message):
    def forge(data):
        list(data["cells"].values())[1][key] = value

    with pytest.raises(ConfigError, match=f"cell sac/Pendulum-v1/-/2: {message} without control characters$"):
        forged_sweep_report(tmp_path, forge)
    assert not (tmp_path / "sweeps" / "f" / "report.md").exists()


def test_the_driver_writes_a_node_and_error_its_next_run_reads_back(tmp_path):
    """What the driver records (a run's error line, Ray's node name) is saved as one printable bounded line,
    so that the checks above never refuse a manifest the driver wrote."""
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seeds", "1", "-n", "2000", "--name", "d"]
    spec = sweep_cli.spec_from_args(sweep_cli.build_parser().parse_args([*argv, "-f", str(tmp_path)]))
    manifest = new_manifest(spec, "python -m rlbench.sweep ...")
    record = next(iter(manifest.cells.values()))
    record.state, record.attempts = FAILED, 1
    record.node, record.error = "host\r/1234abcd", "ValueError: bad\nsecond line " + "é" * 2000
    manifest.save(tmp_path / "d")
    read = next(iter(load_manifest(tmp_path / "d" / MANIFEST_FILE, spec).cells.values()))
    assert read.node == "host\\r/1234abcd"
    assert read.error.startswith("ValueError: bad\\nsecond line éé") and read.error.endswith("é...")
    assert len(read.error) == 1000


def test_a_forged_peer_cell_and_manifest_error_reach_the_bench_returns_report_as_text(tmp_path):
    """`bench returns --peer`'s report: a peer cell's peer_cell.json error (and the peer's version line, its
    probe's answer) and a failed rlbench cell's manifest error, each forged."""
    from rlbench.bench import peer as sbx
    from rlbench.bench.returns import build_parser, check_args, recorded_manifest, write_report

    log, output = tmp_path / "runs", tmp_path / "returns.md"
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seed-list", "1", "2", "-f", str(log), "-n", "200"]
    args = build_parser().parse_args([*argv, "--eval-freq", "100", "--output", str(output), "--at-steps", "100"])
    spec = check_args(args)
    manifest = new_manifest(spec, "python -m rlbench.bench returns ...")
    first, second = (manifest.cells[cell.key] for cell in spec.cells())
    first.state, first.run_dir, first.wall_time_s = DONE, "sac/Pendulum-v1_1", 3.0
    second.state, second.error = FAILED, f"[FORGED](http://e)|{IMG}"
    manifest.save(log / "sweeps" / spec.name)
    write_evaluations(log / first.run_dir, [100, 200], [-900.0, -500.0])
    cells = [
        sbx.PeerCell(cell, tmp_path / "sbx" / f"c{cell.seed}", "sac", {"n_timesteps": 200}) for cell in spec.cells()
    ]
    forged = {"state": "failed", "wall_time_s": 1.0, "error": f"x|{IMG}\n# FORGED heading\n- FORGED item"}
    for cell in cells:
        cell.folder.mkdir(parents=True)
        (cell.folder / sbx.STATE_FILE).write_text(json.dumps(forged))
    peer = sbx.Peer("/venv/bin/python", f"sbx 0.28.0 {IMG}|")
    write_report(spec, recorded_manifest(spec, log), args, "python -m rlbench.bench returns ...", (peer, cells))
    report = output.read_text()
    assert_shown_as_text(report)
    assert "| rlbench sac | Pendulum-v1 | 1 | sac/Pendulum-v1_1 | 200 | -500.0 | 3 |" in report.splitlines()
    assert "Missing (failed) runs: sac/Pendulum-v1 seed 2 ([FORGED]&#40;http://e)&#124;&lt;img src=x" in report
    failed = "(failed: x&#124;&lt;img src=x onerror=alert(1)&gt;\\n# FORGED heading\\n- FORGED item)"
    assert f"SBX cells without a finished run: sac/Pendulum-v1 seed 1 {failed}, sac/Pendulum-v1 seed 2 " in report
    assert "SBX through RL Zoo (sbx 0.28.0 &lt;img src=x onerror=alert(1)&gt;&#124;), each cell" in report


def test_a_forged_peer_cell_error_reaches_the_console_as_one_printable_line(tmp_path, capsys):
    """peer_cell.json's error on the console (`sbx cell without a finished run: ...`): terminal escape codes and
    line breaks shown escaped, so a forged file can neither draw on the terminal nor add lines."""
    from rlbench.bench import peer as sbx
    from rlbench.bench.returns import peer_code
    from rlbench.sweep.grid import SweepSpec

    spec = SweepSpec(name="r", algos=("sac",), envs=("Pendulum-v1",), seeds=(1,), n_timesteps=200, eval_freq=100)
    cell = sbx.PeerCell(spec.cells()[0], tmp_path / "c1", "sac", {"n_timesteps": 200})
    cell.folder.mkdir()
    forged = {"state": "failed", "wall_time_s": 1.0, "error": "x\x1b[2J\nFORGED line"}
    (cell.folder / sbx.STATE_FILE).write_text(json.dumps(forged))
    assert peer_code([cell]) == 1
    err = capsys.readouterr().err
    assert err == "sbx cell without a finished run: sac/Pendulum-v1 seed 1 (failed: x\\x1b[2J\\nFORGED line)\n"


def test_bench_returns_refuses_a_forged_manifest_node_in_one_line_before_writing(tmp_path):
    """The manifest's node and error checked as its other fields: exit 2, one line naming the cell and field,
    no report written (here `--report-only`, which reads the manifest and trains nothing)."""
    from rlbench.bench.returns import build_parser, check_args

    log, output = tmp_path / "runs", tmp_path / "returns.md"
    argv = ["--algos", "sac", "--envs", "Pendulum-v1", "--seed-list", "1", "-f", str(log), "-n", "200"]
    argv += ["--eval-freq", "100", "--output", str(output)]
    spec = check_args(build_parser().parse_args(argv))
    manifest = new_manifest(spec, "python -m rlbench.bench returns ...")
    record = manifest.cells["sac/Pendulum-v1/-/1"]
    record.state, record.run_dir, record.node = DONE, "sac/Pendulum-v1_1", "n"
    manifest.save(log / "sweeps" / spec.name)
    path = log / "sweeps" / spec.name / MANIFEST_FILE
    path.write_text(path.read_text().replace('"node": "n"', '"node": "n\\n# FORGED heading"'))
    write_evaluations(log / record.run_dir, [100, 200], [-900.0, -500.0])
    before = sorted(tmp_path.rglob("*"))
    done = subprocess.run(
        [sys.executable, "-m", "rlbench.bench", "returns", *argv, "--report-only"],
        cwd=tmp_path,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": REPO_ROOT},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: {path}: cell sac/Pendulum-v1/-/1: node must be one line of at most 300 characters without "
        "control characters\n"
    )
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    "forged",
    [
        {"state": "done", "wall_time_s": "x"},
        {"state": "done", "wall_time_s": float("inf")},
        {"state": "failed", "error": 5},
    ],
    ids=["wall time a string", "wall time infinite", "error a number"],
)
def test_a_peer_cell_whose_wall_time_or_error_is_not_as_written_is_a_failed_cell_named_in_the_report(tmp_path, forged):
    """`"wall_time_s": "x"` in peer_cell.json was a ValueError traceback from `bench returns` (its console
    line and report format it as a number); now the cell is failed, the file named."""
    from rlbench.bench import peer as sbx
    from rlbench.sweep.grid import SweepSpec

    spec = SweepSpec(name="r", algos=("sac",), envs=("Pendulum-v1",), seeds=(1,), n_timesteps=200, eval_freq=100)
    cell = sbx.PeerCell(spec.cells()[0], tmp_path / "c1", "sac", {"n_timesteps": 200})
    cell.folder.mkdir()
    (cell.folder / sbx.STATE_FILE).write_text(json.dumps(forged))
    path = cell.folder / sbx.STATE_FILE
    assert list(sbx.not_done([cell])) == [f"sac/Pendulum-v1 seed 1 (failed: {path}: not a peer cell's outcome)"]
    assert sbx.report_group([cell], "Pendulum-v1", "sac", tmp_path) == (None, [])
