"""Matrices that check one property across variants (vmapped == separate for every algorithm, a resume
bit-identical for every learner, the device loop == the host loop on every env kind): the default run
checks the variants that cover distinct code paths, and the others carry the `slow` mark, so CI's slow
phase checks the whole matrix while the README's test command stays short (issue 47).

    @pytest.mark.parametrize("algo", ["sac", slow_variant("crossq"), slow_variant("td3")])

benchmarks/README.md ("Issue 47") lists each variant moved to the slow run and the default test that still
covers its code path."""

from __future__ import annotations

import pytest
from _pytest.mark.structures import ParameterSet


def slow_variant(*values: object, id: str | None = None) -> ParameterSet:
    """One row of a parametrize list (its values, one per argument name) that runs with `-m slow` only."""
    return pytest.param(*values, marks=pytest.mark.slow, id=id)
