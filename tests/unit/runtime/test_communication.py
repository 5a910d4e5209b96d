"""Byte accounting from the payload tensors, and the wire's rounding."""

from __future__ import annotations

import torch

from fedloom.algorithms.base import Record
from fedloom.runtime.communication import bytes_by_group, key_group, record_bytes, transmit


def test_bytes_by_group_in_bf16():
    rec = Record(
        {
            "model.layers.1.self_attn.q_proj.lora_A.default.weight": torch.zeros(8, 64),
            "model.layers.1.self_attn.q_proj.lora_B.default.weight": torch.zeros(64, 8),
            "router.fc1.weight": torch.zeros(3, 4),
            "counts": torch.zeros(5, dtype=torch.int64),
        },
        {"num_examples": 12, "name": "abc", "flag": True},
    )
    groups = bytes_by_group(rec, torch.bfloat16)
    assert groups == {"A": 1024, "B": 1024, "router": 24, "counts": 40, "scalars": 8 + 3 + 1}
    assert record_bytes(rec, torch.float32) == 2048 + 2048 + 48 + 40 + 12


def test_transmit_rounds_to_the_wire_dtype_and_leaves_the_sender_alone():
    x = torch.tensor([1.0 + 2**-10, 3.0])
    sent = Record({"w": x})
    got = transmit(sent, torch.bfloat16)
    assert got.tensors["w"].dtype == torch.float32
    assert got.tensors["w"].tolist() == [1.0, 3.0]  # 1 + 2^-10 is not representable in bf16
    assert x[0].item() == 1.0 + 2**-10
    assert transmit(sent, torch.float32).tensors["w"].tolist() == x.tolist()


def test_key_groups():
    assert key_group("m.lora_A.e3.weight") == "A"
    assert key_group("m.base_delta") == "base_delta"
    assert key_group("head.weight") == "head"
