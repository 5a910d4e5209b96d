"""`Record` ↔ Flower ``RecordDict``, exactly.

A record named ``name`` travels as three entries: ``name.tensors`` (an ``ArrayRecord`` under the
tensors' own keys), ``name.scalars`` (a ``ConfigRecord``: int, float, str and bool are all its value
types) and ``name.meta``. NumPy has no bfloat16, so bf16 wire tensors travel as their uint16 bit
patterns (2 bytes each, as counted) and ``name.meta`` lists those keys; the receiver rebuilds the
identical bf16 values. Several named records can share one message (download + server state).
"""

from __future__ import annotations

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedloom.algorithms.base import Record

BF16_KEYS = "bf16_keys"


def to_recorddict(record: Record, wire: torch.dtype, name: str = "record") -> RecordDict:
    """Encode a record for the wire: floating tensors in ``wire`` dtype, scalars as they are."""
    arrays, bf16 = {}, []
    for key, value in record.tensors.items():
        value = value.detach().cpu()
        if value.is_floating_point() and wire == torch.bfloat16:
            arrays[key] = Array(value.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))
            bf16.append(key)
        elif value.is_floating_point():
            arrays[key] = Array(value.to(wire).numpy())
        else:
            arrays[key] = Array(value.numpy())
    return RecordDict(
        {
            f"{name}.tensors": ArrayRecord(array_dict=arrays),
            f"{name}.scalars": ConfigRecord(dict(record.scalars)),
            f"{name}.meta": ConfigRecord({BF16_KEYS: bf16}),
        }
    )


def from_recorddict(content: RecordDict, name: str = "record") -> Record:
    """Decode a record: floating tensors come back as float32 (bf16 values restored bit for bit)."""
    bf16 = set(content.config_records[f"{name}.meta"].get(BF16_KEYS, []))  # type: ignore[arg-type]
    tensors = {}
    for key, array in content.array_records[f"{name}.tensors"].items():
        data = torch.from_numpy(np.array(array.numpy()))
        if key in bf16:
            data = data.view(torch.int16).view(torch.bfloat16)
        tensors[key] = data.float() if data.is_floating_point() else data
    return Record(tensors, dict(content.config_records[f"{name}.scalars"]))  # type: ignore[arg-type]
