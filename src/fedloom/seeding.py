"""Every random stream is derived from the run seed and a label, never from global state, so any
round of any client can be replayed alone (and resumed exactly) on any machine."""

from __future__ import annotations

import hashlib

import torch


def derive_seed(seed: int, *labels: object) -> int:
    """A 63-bit seed from the run seed and labels (stable across processes and platforms)."""
    text = "/".join([str(seed), *map(str, labels)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & (2**63 - 1)


def generator(seed: int, *labels: object) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, *labels))
