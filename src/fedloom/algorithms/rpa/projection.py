"""The public random projection P of seed 000, eq. 8, applied without ever materializing it.

P ∈ {±1/√q}^{q×d} (Rademacher, the default) or N(0, 1/q) entries (Gaussian), fixed by a public seed.
``P v`` is computed block by block over d: the columns of block b are regenerated from
``(seed, b)`` with a fresh generator, so memory is O(q · block) and every party derives the
identical P on any machine. ``full`` is the identity (routing in R^d, the ablation without
projection). A learned projection is a trainable low-rank map and lives with its owner; see
`fedloom.algorithms.rpa.algorithm`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch import Tensor

from fedloom.runtime.seeding import derive_seed

ProjectionKind = Literal["rademacher", "gaussian", "full"]
BLOCK = 16384


def projection_block(seed: int, block: int, q: int, width: int, kind: ProjectionKind) -> Tensor:
    """Columns ``[block·BLOCK, block·BLOCK + width)`` of P, shape [q, width], from (seed, block) alone."""
    block_seed = derive_seed(seed, "projection", kind, block)
    if kind == "rademacher":  # random bytes unpacked to 8 signs each (NumPy's PCG64: fast, portable)
        packed = np.random.default_rng(block_seed).integers(0, 256, (q, -(-width // 8)), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1)[:, :width]
        return torch.from_numpy(bits).float().mul_(2).sub_(1).div_(q**0.5)
    g = torch.Generator().manual_seed(block_seed)
    if kind == "gaussian":
        return torch.randn(q, width, generator=g) / q**0.5
    raise ValueError(f"projection kind {kind!r} has no blocks")


def project(vector: Tensor, seed: int, q: int, kind: ProjectionKind = "rademacher") -> Tensor:
    """``P v`` for a flat vector v of length d (eq. 8); ``full`` returns v itself."""
    if kind == "full":
        return vector.float()
    v = vector.float().reshape(-1)
    out = torch.zeros(q)
    for block, start in enumerate(range(0, v.numel(), BLOCK)):
        part = v[start : start + BLOCK]
        out += projection_block(seed, block, q, part.numel(), kind) @ part
    return out


def materialize(d: int, seed: int, q: int, kind: ProjectionKind = "rademacher") -> Tensor:
    """The whole q×d matrix (tests and small d only)."""
    return torch.cat(
        [projection_block(seed, b, q, min(BLOCK, d - s), kind) for b, s in enumerate(range(0, d, BLOCK))], 1
    )
