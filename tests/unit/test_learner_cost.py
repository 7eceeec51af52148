"""The learner line train.py prints at start: parameters and FLOP per gradient step, against a count by hand."""

import re
from itertools import pairwise

import pytest

from rlbench.config.hyperparams import merge
from rlbench.config.registry import ALGORITHMS
from rlbench.run.cost import gradient_step_gflop, learner_summary, parameter_counts, si
from rlbench.types import EnvSpec

PENDULUM = EnvSpec(obs_dim=3, action_dim=1)


def sac_config(**entry):
    sac = ALGORITHMS["sac"]
    return sac.build_config(merge(sac.preset, entry), 1, "test")


def test_sac_net_arch_16_on_pendulum_counted_by_hand():
    """Actor: 3 -> 16 (weights and biases), then a mean and a log-std head 16 -> 1 each; two critics, each
    (3 + 1) -> 16 -> 1. FLOP: the matrix products of the bench's count by hand (tests/integration/
    test_bench_speed.py) at width 16, which XLA's count includes with the elementwise work besides."""
    cfg = sac_config(policy_kwargs={"net_arch": [16]})
    actor = (3 * 16 + 16) + 2 * (16 + 1)
    critics = 2 * ((3 + 1) * 16 + 16 + (16 + 1))
    assert (actor, critics) == (98, 194)
    learner = ALGORITHMS["sac"].make_learner(cfg, PENDULUM)
    assert parameter_counts(learner) == (actor, critics)

    def macs(widths):
        return sum(a * b for a, b in pairwise(widths))

    pi, qf = [3, 16, 2], [4, 16, 1]
    critic_step = macs(pi) + 2 * macs(qf) + 2 * macs(qf) + 2 * (macs(qf) + macs(qf[1:]))
    actor_step = macs(pi) + 2 * macs(qf) + 2 * macs(qf) + macs(pi) + macs(pi[1:])
    by_hand = 2 * 256 * (critic_step + actor_step)
    assert by_hand == 565_248
    flop = gradient_step_gflop(learner, cfg, PENDULUM) * 1e9
    assert by_hand <= flop <= 1.5 * by_hand  # at width 16, activations, losses and Adam are a third more
    line = learner_summary(ALGORITHMS["sac"], cfg, PENDULUM)
    assert (
        line
        == f"Learner: 292 parameters (actor 98, critics 194); about {si(flop, 'FLOP')} per gradient step at batch 256"
    )
    assert re.fullmatch(r"\d{3} kFLOP", si(flop, "FLOP"))


def test_simba_costs_more_than_the_mlp_and_says_so():
    """At the same net_arch, SimbaPolicy's residual blocks are 4x wider inside: the line shows it."""
    sac = ALGORITHMS["sac"]
    numbers = {}
    for policy in ("MlpPolicy", "SimbaPolicy"):
        line = learner_summary(sac, sac_config(policy=policy, policy_kwargs={"net_arch": [256, 256]}), PENDULUM)
        match = re.fullmatch(
            r"Learner: (\S+) parameters .*; about (\S+) (\w?)FLOP per gradient step at batch 256", line
        )
        assert match, line
        numbers[policy] = (match[1], float(match[2]) * {"G": 1e9, "M": 1e6, "k": 1e3, "": 1}[match[3]])
    assert numbers["MlpPolicy"][0] == "202k" and numbers["MlpPolicy"][1] == pytest.approx(553e6, rel=0.01)
    assert numbers["SimbaPolicy"][0] == "3.16M" and numbers["SimbaPolicy"][1] > 10 * numbers["MlpPolicy"][1]


def test_si_rounds_before_choosing_the_prefix():
    assert [si(v) for v in (0, 98, 999, 67_330, 999_600, 3.16e6)] == ["0", "98", "999", "67.3k", "1M", "3.16M"]
    assert si(8.7e9, "FLOP") == "8.7 GFLOP"
