"""`Record` ↔ Flower ``RecordDict``, exactly.

Tensors travel in an ``ArrayRecord`` under their own keys. NumPy has no bfloat16, so bf16 wire
tensors travel as their uint16 bit patterns (2 bytes each, as counted) and the list of such keys
rides in a ``ConfigRecord``; the receiver rebuilds the identical bf16 values. Scalars travel in a
``ConfigRecord`` (int, float, str and bool are all ConfigRecord value types).
"""

from __future__ import annotations

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedloom.algorithms.base import Record

TENSORS, SCALARS, META = "tensors", "scalars", "meta"
BF16_KEYS = "bf16_keys"


def to_recorddict(record: Record, wire: torch.dtype) -> RecordDict:
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
            TENSORS: ArrayRecord(array_dict=arrays),
            SCALARS: ConfigRecord(dict(record.scalars)),
            META: ConfigRecord({BF16_KEYS: bf16}),
        }
    )


def from_recorddict(content: RecordDict) -> Record:
    """Decode a record: floating tensors come back as float32 (bf16 values restored bit for bit)."""
    bf16 = set(content.config_records[META].get(BF16_KEYS, []))
    tensors = {}
    for key, array in content.array_records[TENSORS].items():
        data = torch.from_numpy(np.array(array.numpy()))
        if key in bf16:
            data = data.view(torch.int16).view(torch.bfloat16)
        tensors[key] = data.float() if data.is_floating_point() else data
    return Record(tensors, dict(content.config_records[SCALARS]))


STATE_TENSORS, STATE_SCALARS = "fedloom.state.tensors", "fedloom.state.scalars"


def store_state(state: RecordDict, record: Record) -> None:
    """Keep a client's private state in Flower's per-node ``context.state``, exactly (float32)."""
    encoded = to_recorddict(record, torch.float32)
    state[STATE_TENSORS] = encoded.array_records[TENSORS]
    state[STATE_SCALARS] = encoded.config_records[SCALARS]


def load_state(state: RecordDict) -> Record | None:
    """The private state stored by `store_state`, or None on the node's first round."""
    if STATE_TENSORS not in state.array_records:
        return None
    content = RecordDict(
        {
            TENSORS: state.array_records[STATE_TENSORS],
            SCALARS: state.config_records[STATE_SCALARS],
            META: ConfigRecord({BF16_KEYS: []}),
        }
    )
    return from_recorddict(content)
