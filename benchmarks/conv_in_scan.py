#!/usr/bin/env python3
"""Why NatureCNN's convolutions are patches times the kernel (rlbench.networks.nature_cnn.PatchConv): the gradient of
NatureCNN on a batch of Atari frames, timed outside and inside a `lax.scan` (the fused gradient steps run inside
one), with XLA's convolution and with PatchConv. Prints one JSON line per case (ms per gradient step).

    python benchmarks/conv_in_scan.py [--batch 32] [--steps 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from rlbench.networks.nature_cnn import NATURE_CONVOLUTIONS, image_patches

ATARI = (84, 84, 4)
Conv = Callable[[jax.Array, jax.Array, int], jax.Array]  # (images, kernel, stride) -> feature maps


def xla_conv(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    layout = ("NHWC", "HWIO", "NHWC")
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), "VALID", dimension_numbers=layout)


def patch_conv(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    return image_patches(x, kernel.shape[0], stride) @ kernel.reshape(-1, kernel.shape[-1])


def nature_cnn(params: list[jax.Array], x: jax.Array, conv: Conv) -> jax.Array:
    for kernel, (_, _, stride) in zip(params[:-1], NATURE_CONVOLUTIONS, strict=True):
        x = jax.nn.relu(conv(x, kernel, stride))
    return jax.nn.relu(x.reshape(x.shape[0], -1) @ params[-1])


def parameters() -> list[jax.Array]:
    shapes: list[tuple[int, ...]] = []
    channels = ATARI[-1]
    for filters, kernel, _ in NATURE_CONVOLUTIONS:
        shapes.append((kernel, kernel, channels, filters))
        channels = filters
    shapes.append((7 * 7 * 64, 512))
    keys = jax.random.split(jax.random.key(0), len(shapes))
    return [0.05 * jax.random.normal(key, shape) for key, shape in zip(keys, shapes, strict=True)]


def sgd_steps(params: list[jax.Array], x: jax.Array, conv: Conv, n: int | None) -> list[jax.Array]:
    """One gradient step (n None), or n of them in a lax.scan."""

    def step(params: list[jax.Array], _: None) -> tuple[list[jax.Array], None]:
        grads = jax.grad(lambda p: jnp.sum(nature_cnn(p, x, conv) ** 2))(params)
        return [p - 1e-3 * g for p, g in zip(params, grads, strict=True)], None

    if n is None:
        return step(params, None)[0]
    return jax.lax.scan(step, params, None, length=n)[0]


def milliseconds(fn: Callable[..., Any], *args: Any, repeats: int) -> float:
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=4, help="gradient steps in the scan")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    params, x = parameters(), jax.random.uniform(jax.random.key(1), (args.batch, *ATARI))
    for name, conv in (("xla_conv", xla_conv), ("patch_conv", patch_conv)):
        for n in (None, args.steps):
            fn = jax.jit(functools.partial(sgd_steps, conv=conv, n=n))
            ms = milliseconds(fn, params, x, repeats=args.repeats) / (n or 1)
            where = "outside a scan" if n is None else f"in a scan of {n}"
            print(json.dumps({"conv": name, "where": where, "batch": args.batch, "ms_per_step": round(ms, 2)}))


if __name__ == "__main__":
    main()
