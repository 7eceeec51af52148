#!/usr/bin/env python3
"""Where TQC's gradient step spends its time beyond SAC's: the compiled update alone (`bench speed`'s
update_only_rate, fixed random batches, no env), for SAC and for TQC with parts of its objective swapped:

- sac:                SAC, same networks (the floor: the same products, one Q value per critic)
- tqc:                TQC as shipped (truncation by top_k)
- tqc_sort:           the truncation by a full sort of the pooled atoms (before 2026-12-01)
- tqc_no_truncation:  the first n_target atoms, unsorted (not TQC: what any truncation costs)
- tqc_mean_loss:      the quantile Huber loss replaced by the squared error of means (not TQC: what the
                      pairwise loss costs)
- tqc_custom_vjp:     the quantile Huber loss with a hand-written backward pass (recomputes delta instead of
                      keeping XLA's residuals)

Settings as `bench speed --case tqc 1 1`: HalfCheetah-v4's sizes (17, 6), batch 256, actor and critics
[256, 256], 2 critics x 25 quantiles, 2 dropped per critic, float32. Variants are timed in turns, `--repeats`
rounds of `--seconds` each; the best of each is printed as one JSON line.

    python benchmarks/tqc_update_ablation.py --repeats 3
"""

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp

from rlbench.algos.common.losses import CriticObjective
from rlbench.algos.common.quantiles import (
    mean_of_quantiles,
    pooled_atoms,
    quantile_huber_loss,
    quantile_midpoints,
    quantile_objective,
    soft_atom_target,
)
from rlbench.algos.soft.learner import make_soft_learner
from rlbench.bench.row import bench_config, update_only_rate
from rlbench.bench.speed import machine
from rlbench.config.registry import ALGORITHMS
from rlbench.types import EnvSpec

HALF_CHEETAH_SPEC = (17, 6)  # HalfCheetah-v4's observation and action sizes


def sorted_target(n_target):
    def target(next_q, next_log_prob, reward, terminated, alpha, gamma):
        kept = jnp.sort(pooled_atoms(next_q), axis=-1)[:, :n_target]
        return soft_atom_target(kept, next_log_prob, reward, terminated, alpha, gamma)

    return target


def unsorted_target(n_target):
    def target(next_q, next_log_prob, reward, terminated, alpha, gamma):
        return soft_atom_target(pooled_atoms(next_q)[:, :n_target], next_log_prob, reward, terminated, alpha, gamma)

    return target


def mean_loss(quantiles, target):
    return ((quantiles.mean(-1) - target.mean(-1)[None]) ** 2).mean()


@jax.custom_vjp
def custom_vjp_loss(quantiles, target):
    return quantile_huber_loss(quantiles, target)


def _loss_forward(quantiles, target):
    return quantile_huber_loss(quantiles, target), (quantiles, target)


def _loss_backward(residuals, g):
    quantiles, target = residuals
    tau = quantile_midpoints(quantiles.shape[-1])[:, None]
    delta = target[None, :, None, :] - quantiles[..., None]
    weight = jnp.where(delta < 0, 1.0 - tau, tau)
    scale = -g / (quantiles.size * target.shape[-1])  # d/dz of the mean of weight * Huber(t - z)
    return (weight * jnp.clip(delta, -1.0, 1.0)).sum(-1) * scale, jnp.zeros_like(target)


custom_vjp_loss.defvjp(_loss_forward, _loss_backward)


def cpu_flags() -> list[str]:
    """The flags that decide float32 and bfloat16 product speed on this CPU."""
    wanted = {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return sorted(wanted & set(line.split(":", 1)[1].split()))
    return []


def learners(spec):
    sac_cfg = bench_config("sac", 1, [256, 256])
    cfg = bench_config("tqc", 1, [256, 256])
    quantiles = cfg.quantiles
    n_target = quantiles.n_target_quantiles(cfg.n_critics)
    shipped = quantile_objective(quantiles)

    def tqc(objective):
        return make_soft_learner(cfg, spec, objective, quantiles.n_quantiles), cfg

    return {
        "sac": (ALGORITHMS["sac"].make_learner(sac_cfg, spec), sac_cfg),
        "tqc": (ALGORITHMS["tqc"].make_learner(cfg, spec), cfg),
        "tqc_sort": tqc(shipped._replace(target=sorted_target(n_target))),
        "tqc_no_truncation": tqc(shipped._replace(target=unsorted_target(n_target))),
        "tqc_mean_loss": tqc(CriticObjective(shipped.target, mean_loss, mean_of_quantiles)),
        "tqc_custom_vjp": tqc(shipped._replace(loss=custom_vjp_loss)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    spec = EnvSpec(*HALF_CHEETAH_SPEC)
    variants = learners(spec)
    for learner, cfg in variants.values():
        update_only_rate(learner, cfg, spec, seconds=0.5)  # compile
    rates = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, (learner, cfg) in variants.items():
            rates[name].append(update_only_rate(learner, cfg, spec, seconds=args.seconds))
    host = machine() | {"cpu_flags": cpu_flags()}
    for name, samples in rates.items():
        row = {"variant": name, "update_only_grad_steps_per_s": round(max(samples), 1)}
        print(json.dumps(row | {"samples": [round(s, 1) for s in samples], **host}))


if __name__ == "__main__":
    main()
