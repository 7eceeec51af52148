"""rlbench.report.statistics: rliable's estimates on hand-made data, the sentences, the pairs compared, the
normalisation across envs, and that every report is the same twice (seeded bootstrap)."""

import numpy as np
import pytest

from rlbench.report import statistics
from rlbench.report.statistics import Estimate, Scores

REPS = 200  # enough for intervals that tell these cases apart, fast


def test_iqm_and_mean_of_a_hand_made_array():
    # [runs, envs]: IQM over all 8 values: sorted 0 1 2 10 11 12 13 100, a quarter cut at each end: (2 + 10 +
    # 11 + 12) / 4 = 8.75; mean of the per-env means: ((0 + 1 + 2 + 100) / 4 + (10 + 11 + 12 + 13) / 4) / 2.
    scores = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0], [100.0, 13.0]])
    iqm, mean = statistics.iqm_and_mean(scores, REPS)
    assert iqm.point == 8.75 and mean.point == pytest.approx((25.75 + 11.5) / 2)
    for estimate in (iqm, mean):
        assert scores.min() <= estimate.low <= estimate.point <= estimate.high <= scores.max()
    one_env_iqm, one_env_mean = statistics.iqm_and_mean(np.array([[1.0], [2.0], [3.0], [100.0]]), REPS)
    assert (one_env_iqm.point, one_env_mean.point) == (2.5, 26.5)


def test_one_variant_better_by_construction_has_p_improvement_near_one():
    better = np.array([5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    worse = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.5])  # only 5 < 5.5 of the 36 pairs goes the other way
    estimate = statistics.probability_of_improvement(better[:, None], worse[:, None], REPS)
    assert estimate.point == pytest.approx(35 / 36)
    assert 0.5 < estimate.low <= estimate.point <= estimate.high <= 1.0
    reverse = statistics.probability_of_improvement(worse[:, None], better[:, None], REPS)
    assert reverse.point == pytest.approx(1 / 36) and reverse.high < 0.5
    assert statistics.verdict("A", "B", estimate, 6) == "A better"
    assert statistics.verdict("A", "B", reverse, 6) == "B better"


def test_identical_variants_have_p_improvement_near_a_half_and_an_interval_holding_it():
    first, second = np.array([3.0, 1.0, 2.0, 0.0]), np.array([0.0, 1.0, 2.0, 3.0])  # the same runs, reordered
    estimate = statistics.probability_of_improvement(first[:, None], second[:, None], REPS)
    assert estimate.point == 0.5 and estimate.low < 0.5 < estimate.high
    assert statistics.verdict("A", "B", estimate, 4) == "no detectable difference"


def test_sentences_in_plain_words():
    where = "on HalfCheetah-v4 at 50k"
    assert (
        statistics.sentence("rlbench SAC", "SBX SAC", where, Estimate(0.48, 0.21, 0.75), 4)
        == "rlbench SAC vs SBX SAC on HalfCheetah-v4 at 50k: P(improvement) 0.48 [0.21, 0.75], no detectable difference"
    )
    assert statistics.sentence("A", "B", where, Estimate(0.9, 0.6, 1.0), 4).endswith("[0.60, 1.00], A better")
    assert statistics.sentence("A", "B", where, Estimate(0.1, 0.0, 0.4), 4).endswith("[0.00, 0.40], B better")
    assert statistics.sentence("A", "B", where, Estimate(1.0, 1.0, 1.0), 2).endswith(
        "P(improvement) 1.00 [1.00, 1.00], too few seeds to tell (2 on one side, a verdict needs 3 or more on each)"
    )
    assert [statistics.steps_text(s) for s in (600, 1500, 50_000, 12_345, 1_000_000)] == [
        "600",
        "1.5k",
        "50k",
        "12345",
        "1M",
    ]


def scores(env, label, values, algo=None):
    return Scores(env, label, algo or label.split()[-1], 1000, np.asarray(values, dtype=float))


def test_pairs_compared_are_an_algorithms_variants_else_the_algorithms():
    a, b, c = scores("E", "rlbench sac", [1]), scores("E", "SBX sac", [1]), scores("E", "rlbench tqc", [1])
    d = scores("E", "SBX tqc", [1])
    assert statistics.compared_pairs([a, b, c, d]) == [(a, b), (c, d)]
    assert statistics.compared_pairs([a, c]) == [(a, c)]


def test_the_report_shows_rliables_numbers_per_env_and_normalised_across_envs():
    curves = [
        scores("A", "x", [0.0, 10.0, 5.0]),
        scores("A", "y", [5.0, 5.0, 5.0]),
        scores("B", "x", [1.0, 1.0, 1.0]),
        scores("B", "y", [3.0, 2.0, 2.0]),
    ]
    lines = statistics.comparison_section(curves, REPS)
    iqm, mean = statistics.iqm_and_mean(np.array([[0.0], [10.0], [5.0]]), REPS)
    assert f"| A | x | 3 | 1000 | {iqm.text()} | {mean.text()} |" in lines
    # On A, x's 10 beats y's three 5s, its 5 ties them (half each) and its 0 loses: (3 + 1.5) / 9 = 0.5.
    p_a = statistics.probability_of_improvement(np.array([[0.0], [10.0], [5.0]]), np.array([[5.0]] * 3), REPS)
    assert p_a.point == 0.5
    assert f"- x vs y on A at 1k: P(improvement) {p_a.text()}, no detectable difference" in lines
    # Env A normalised by [0, 10], env B by [1, 3]: x -> A (0, 1, .5), B (0, 0, 0); y -> A (.5, .5, .5),
    # B (1, .5, .5). IQM of x's six values 0 0 0 0 .5 1 (one cut at each end): .125; mean of its env means
    # (.5 + 0) / 2 = .25. y: IQM .5, mean (.5 + 2/3) / 2 = .583.
    across, left_out = statistics.normalised(curves)
    assert [c.label for c in across] == ["x", "y"] and left_out == []
    np.testing.assert_array_equal(across[0].values, [[0.0, 0.0], [1.0, 0.0], [0.5, 0.0]])
    np.testing.assert_array_equal(across[1].values, [[0.5, 1.0], [0.5, 0.5], [0.5, 0.5]])
    rows = [line for line in lines if line.startswith(("| x | 2 | 3 |", "| y | 2 | 3 |"))]
    assert rows[0].startswith("| x | 2 | 3 | 0.12 [") and "| 0.25 [" in rows[0]
    assert rows[1].startswith("| y | 2 | 3 | 0.50 [") and "| 0.58 [" in rows[1]
    assert any(line.startswith("- x vs y over 2 envs (normalised): P(improvement) ") for line in lines)
    assert not any("Across envs" in line for line in statistics.comparison_section(curves[:2], REPS))


def test_reports_are_the_same_twice_and_leave_numpys_generator_alone(tmp_path):
    curves = [scores("A", "x", [0.0, 10.0, 3.0]), scores("A", "y", [5.0, 5.0, 4.0])]
    np.random.seed(7)
    before = np.random.get_state()[1].copy()
    first = statistics.comparison_section(curves, REPS)
    assert np.array_equal(np.random.get_state()[1], before)
    np.random.seed(8)  # whatever state numpy's generator is in, the report is the same
    assert statistics.comparison_section(curves, REPS) == first
    other_seed = statistics.comparison_section(curves, REPS, seed=1)
    assert other_seed[1:] != first[1:]  # the seed is what makes it the same (the first line names it)
    png = statistics.plot_profile(curves, tmp_path / "profile.png", REPS)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_curves_missing_an_env_are_left_out_across_envs_and_said():
    curves = [scores("A", "x", [0.0, 1.0]), scores("A", "y", [2.0, 3.0]), scores("B", "x", [0.0, 1.0])]
    across, left_out = statistics.normalised(curves)
    assert [c.label for c in across] == ["x"] and left_out == ["y"]
    lines = statistics.comparison_section(curves, REPS)
    assert lines[-1] == "Left out across envs (not on every env, or other seed counts): y"
