"""Secure aggregation: the server learns only the sample-weighted mean of the (secure-form) uploads.

On Flower it is SecAgg+ (``SecAggPlusWorkflow`` and ``secaggplus_mod``, flwr 1.42): each client
clips its upload to ±``clipping_range``, quantizes it to ``quantization_range`` levels, scales it
by its sample count and masks it; the masks cancel in the sum. In process, the same mean is computed
directly (no cryptography: the emulation checks the arithmetic, not the privacy). Only methods whose
server step is a weighted sum can use it (`Algorithm.summable`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fedloom.algorithms.aggregation import weighted_average
from fedloom.algorithms.base import NUM_EXAMPLES, Record

MASKED_ENTRY_BYTES = 4  # one masked entry modulo 2^32


def weighted_mean(uploads: Sequence[Record]) -> Record:
    """Σ_i n_i u_i / Σ_i n_i over the uploads' tensors, with the total count: what SecAgg+ reveals."""
    counts = [float(u.scalars[NUM_EXAMPLES]) for u in uploads]
    return Record(weighted_average([u.tensors for u in uploads], counts), {NUM_EXAMPLES: int(sum(counts))})


def clipped(upload: Record, clipping_range: float) -> Record:
    """Every entry clamped to ±clipping_range, as SecAgg+ clips before quantizing."""
    return Record({k: v.clamp(-clipping_range, clipping_range) for k, v in upload.tensors.items()}, upload.scalars)


def masked_bytes(mean: Record) -> int:
    """What one client uploads under SecAgg+: one masked entry per value, plus its masked weight."""
    return MASKED_ENTRY_BYTES * (sum(t.numel() for t in mean.tensors.values()) + 1)
