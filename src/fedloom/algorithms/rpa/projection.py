"""The public random projection P of seed 000, eq. 8, applied without ever materializing it.

P ∈ {±1/√q}^{q×d} (Rademacher, the default) or N(0, 1/q) entries (Gaussian), fixed by a public seed,
or the structured SRHT P = √(n/q) S H D (random signs D, orthonormal Walsh–Hadamard H over the
vector zero-padded to n = 2^⌈log₂ d⌉, q coordinates S sampled without replacement): the same
Johnson–Lindenstrauss guarantee at O(n log n) instead of O(q d) work, and nothing but the seed stored.
``P v`` is computed block by block over d: the columns of block b are regenerated from
``(seed, b)`` with a fresh generator, so memory is O(q · block) and every party derives the
identical P on any machine. ``full`` is the identity (routing in R^d, the ablation without
projection). ``learned`` is ``W P`` with P Rademacher and W a low-rank map the server fits
(`fit_subspace`) and sends with the signatures.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from fedloom.algorithms.config import ProjectionKind
from fedloom.seeding import derive_seed

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
    """``P v`` for a flat vector v of length d (eq. 8); ``full`` returns v itself, ``learned`` the
    Rademacher ``P v`` its W is then applied to."""
    if kind == "full":
        return vector.float()
    if kind == "srht":
        return srht(vector, seed, q)
    kind = "rademacher" if kind == "learned" else kind
    v = vector.float().reshape(-1)
    out = torch.zeros(q)
    for block, start in enumerate(range(0, v.numel(), BLOCK)):
        part = v[start : start + BLOCK]
        out += projection_block(seed, block, q, part.numel(), kind) @ part
    return out


def fwht(x: Tensor) -> Tensor:
    """Walsh–Hadamard transform H x (Sylvester order, unnormalized) of the last dim, a power of 2."""
    n = x.shape[-1]
    if n & (n - 1):
        raise ValueError(f"the Walsh–Hadamard transform needs a power-of-2 length, not {n}")
    y, h = x, 1
    while h < n:  # butterflies of span h: [a, b] → [a + b, a − b]
        pairs = y.reshape(*x.shape[:-1], n // (2 * h), 2, h)
        y = torch.stack((pairs[..., 0, :] + pairs[..., 1, :], pairs[..., 0, :] - pairs[..., 1, :]), dim=-2)
        h *= 2
    return y.reshape(x.shape)


def srht(vector: Tensor, seed: int, q: int) -> Tensor:
    """√(n/q) S H D v with H orthonormal (= fwht / √n): the subsampled randomized Hadamard transform."""
    v = vector.float().reshape(-1)
    n = 1 << max(v.numel() - 1, 0).bit_length()
    if q > n:
        raise ValueError(f"SRHT samples q = {q} of n = {n} coordinates; use q ≤ n")
    rng = np.random.default_rng(derive_seed(seed, "projection", "srht", v.numel()))
    signs = torch.from_numpy(rng.integers(0, 2, v.numel()).astype(np.float32) * 2 - 1)
    rows = torch.from_numpy(np.sort(rng.choice(n, q, replace=False)))
    padded = torch.zeros(n)
    padded[: v.numel()] = v * signs
    return fwht(padded)[rows] / q**0.5  # √(n/q) · (1/√n) H


def materialize(d: int, seed: int, q: int, kind: ProjectionKind = "rademacher") -> Tensor:
    """The whole q×d matrix (tests and small d only)."""
    if kind == "srht":
        return torch.stack([srht(e, seed, q) for e in torch.eye(d)], 1)
    return torch.cat(
        [projection_block(seed, b, q, min(BLOCK, d - s), kind) for b, s in enumerate(range(0, d, BLOCK))], 1
    )


def fit_subspace(rows: Tensor, rank: int) -> Tensor:
    """W [rank, q] with orthonormal rows: the top principal directions of ``rows`` [n, q] (centred),
    completed with coordinate axes (QR) while fewer than ``rank`` directions carry variance."""
    q = rows.shape[1]
    centred = rows.float() - rows.float().mean(0)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    top = vh[: int((s > s.max() * 1e-6).sum()) if s.numel() and s.max() > 0 else 0][:rank]
    basis, _ = torch.linalg.qr(torch.cat([top, torch.eye(q)[:rank]]).T)  # q × (k + rank), top first
    return basis[:, :rank].T.contiguous()
