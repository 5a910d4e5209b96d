"""Flat-vector views of named tensors.

Algorithms think of an adapter as one vector (RPA's prototypes, projections, norms) while the model
needs named tensors. A `TensorLayout` fixes the order and shapes once, so both views convert exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from fedloom.errors import UploadError


@dataclass(frozen=True)
class TensorLayout:
    """An ordered tuple of ``(key, shape)`` entries; ``flatten`` and ``unflatten`` are exact inverses."""

    entries: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def of(cls, tensors: Mapping[str, Tensor]) -> TensorLayout:
        return cls(tuple((k, tuple(v.shape)) for k, v in tensors.items()))

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.entries)

    @property
    def numel(self) -> int:
        return sum(math.prod(shape) for _, shape in self.entries)

    def select(self, keys: Iterable[str]) -> TensorLayout:
        wanted = set(keys)
        return TensorLayout(tuple((k, s) for k, s in self.entries if k in wanted))

    def flatten(self, tensors: Mapping[str, Tensor]) -> Tensor:
        """Concatenate the tensors in layout order into one 1-D vector (shapes checked)."""
        parts = []
        for key, shape in self.entries:
            if key not in tensors:
                raise UploadError(f"tensor {key!r} is missing (layout has {len(self.entries)} keys)")
            value = tensors[key]
            if tuple(value.shape) != shape:
                raise UploadError(f"tensor {key!r} has shape {tuple(value.shape)}, expected {shape}")
            parts.append(value.reshape(-1))
        return torch.cat(parts) if parts else torch.zeros(0)

    def unflatten(self, vector: Tensor) -> dict[str, Tensor]:
        """Split a 1-D vector back into named tensors (views into ``vector``)."""
        if vector.dim() != 1 or vector.numel() != self.numel:
            raise UploadError(f"flat vector has shape {tuple(vector.shape)}, expected ({self.numel},)")
        out, start = {}, 0
        for key, shape in self.entries:
            size = math.prod(shape)
            out[key] = vector[start : start + size].view(shape)
            start += size
        return out
