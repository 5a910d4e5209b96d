"""FedWeave's local schedule (seed 002, §3): a fixed step budget split across buckets in proportion
to their sizes with at least one step per non-empty bucket, then interleaved deterministically."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def allocate_steps(sizes: Sequence[int], budget: int) -> list[int]:
    """Steps per bucket: ≥ 1 for each non-empty bucket, the rest by largest remainder ∝ size.

    >>> allocate_steps([30, 10, 0], 6)
    [4, 2, 0]
    """
    counts = np.asarray(sizes, dtype=float)
    live = counts > 0
    if budget < int(live.sum()):
        raise ValueError(f"a budget of {budget} steps cannot give each of {int(live.sum())} buckets one step")
    steps = live.astype(int)
    rest = budget - int(steps.sum())
    if rest:
        share = rest * counts / counts.sum()
        extra = np.floor(share).astype(int)
        order = np.argsort(-(share - extra), kind="stable")
        extra[order[: rest - int(extra.sum())]] += 1
        steps += extra
    return steps.tolist()


def interleave(steps: Sequence[int]) -> list[int]:
    """Bucket id of every step, spread evenly: bucket c's j-th step sits at (j + ½) / steps_c.

    >>> interleave([2, 1])
    [0, 1, 0]
    """
    slots = [((j + 0.5) / n, c) for c, n in enumerate(steps) for j in range(n)]
    return [c for _, c in sorted(slots)]
