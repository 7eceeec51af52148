"""The sweep's report over hand-made runs (no training): a grid axis is answered by rliable's comparison."""

from rlbench.sweep import command as sweep_cli
from rlbench.sweep.manifest import DONE, new_manifest
from rlbench.sweep.report import write_sweep_report
from tests.integration.test_scripts import write_evaluations


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
