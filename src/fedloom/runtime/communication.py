"""What crosses the wire and what it costs, computed from the actual payload tensors.

Floating-point tensors travel in the wire dtype (bfloat16 by default: 2 bytes per scalar); the
receiver gets them rounded to it and back to float32, so simulated numbers are what a real
deployment would see. Integer tensors travel as they are. Scalars cost 8 bytes (int64 / float64),
strings their UTF-8 length, booleans 1 byte.
"""

from __future__ import annotations

from collections import Counter

import torch

from fedloom.algorithms.base import Record

WIRE_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def transmit(record: Record, dtype: torch.dtype) -> Record:
    """The record as the receiver sees it: floating tensors rounded to ``dtype``, delivered as float32."""
    tensors = {
        k: v.detach().to(dtype).to(torch.float32) if v.is_floating_point() else v.detach().clone()
        for k, v in record.tensors.items()
    }
    return Record(tensors, dict(record.scalars))


def key_group(key: str) -> str:
    """Communication group of a tensor key: emulator (FedBiOT), A, B, base_delta, head, or its first name component."""
    if key.startswith("emulator/"):
        return "emulator"
    if ".lora_A." in key:
        return "A"
    if ".lora_B." in key:
        return "B"
    if key.endswith(".base_delta"):
        return "base_delta"
    return key.split(".", 1)[0]


def bytes_by_group(record: Record, dtype: torch.dtype) -> dict[str, int]:
    """Bytes of each key group on the wire; scalars are grouped under ``scalars``."""
    out: Counter[str] = Counter()
    for key, value in record.tensors.items():
        size = dtype.itemsize if value.is_floating_point() else value.element_size()
        out[key_group(key)] += value.numel() * size
    for scalar in record.scalars.values():
        out["scalars"] += len(scalar.encode()) if isinstance(scalar, str) else 1 if isinstance(scalar, bool) else 8
    return dict(out)


def record_bytes(record: Record, dtype: torch.dtype) -> int:
    return sum(bytes_by_group(record, dtype).values())
