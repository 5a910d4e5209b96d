"""The frozen backbone in bf16 (what `model.dtype: auto` picks on CPUs with native bf16) trains to
the same place as in fp32, within stated tolerances: final train loss and every error metric within
2 % relative, every IC within 0.02, on a tiny 3-round FedAvg run. Adapters, heads and optimizer stay
fp32 in both."""

from __future__ import annotations

import json

import pytest

from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config

pytestmark = pytest.mark.integration


def test_bf16_backbone_matches_fp32_within_tolerance(tmp_path):
    summaries = {}
    for dtype in ("float32", "bfloat16"):
        cfg = small_config(**{"model.dtype": dtype, "rounds": 3})
        summaries[dtype] = run_method(cfg, prepare_workspace(cfg), tmp_path / dtype)
        assert json.loads((tmp_path / dtype / "env.json").read_text())["dtype"] == dtype
    fp32, bf16 = summaries["float32"]["metrics"], summaries["bfloat16"]["metrics"]
    assert set(fp32) == set(bf16)
    assert fp32 != bf16  # bf16 really ran: the numbers differ in their low bits
    for key, ref in fp32.items():
        if "/ic/" in key or "/rank_ic/" in key:
            assert bf16[key] == pytest.approx(ref, abs=0.02), key
        elif "mse" in key or "mae" in key or "loss" in key:
            assert bf16[key] == pytest.approx(ref, rel=0.02), key
