"""`model.dtype: auto` picks bf16 only where this machine measures it clearly faster, measures once
per machine and re-measures when the machine (CPU, torch, threads) changes."""

from __future__ import annotations

import json

import pytest
import torch

from fedloom.backbone import precision
from fedloom.backbone.precision import BF16_WINS_BELOW, auto_dtype, machine_key, matmul_seconds, measure


@pytest.fixture
def timings(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Fake matmul timings (seconds per dtype) and a count of measurements."""
    state = {torch.float32: 1.0, torch.bfloat16: 0.5, "calls": 0}

    def fake(dtype: torch.dtype, *args: object, **kwargs: object) -> float:
        state["calls"] += 1
        return state[dtype]

    monkeypatch.setattr(precision, "matmul_seconds", fake)
    return state


@pytest.mark.parametrize(
    ("bf16", "choice"), [(0.4, "bfloat16"), (BF16_WINS_BELOW * 0.99, "bfloat16"), (0.9, "float32"), (6.0, "float32")]
)
def test_bf16_only_when_clearly_faster(timings, bf16, choice):
    timings[torch.bfloat16] = bf16
    assert measure()["choice"] == choice


def test_measured_once_then_read_from_the_cache(timings, tmp_path):
    cache = tmp_path / "precision.json"
    assert auto_dtype("cpu", cache) == "bfloat16"
    timings[torch.bfloat16] = 9.0  # a later measurement would disagree, but none is made
    assert auto_dtype("cpu", cache) == "bfloat16" and timings["calls"] == 2
    saved = json.loads(cache.read_text())
    assert saved[machine_key()]["float32_s"] == 1.0 and saved[machine_key()]["choice"] == "bfloat16"


@pytest.mark.parametrize("content", ['{"another CPU | torch 1.0": {"choice": "bfloat16"}}', "{not json", "[]", ""])
def test_another_machine_or_a_broken_cache_is_measured_again(timings, tmp_path, content):
    cache = tmp_path / "precision.json"
    cache.write_text(content)
    timings[torch.bfloat16] = 3.0
    assert auto_dtype("cpu", cache) == "float32" and timings["calls"] == 2
    verdicts = json.loads(cache.read_text())
    assert verdicts[machine_key()]["choice"] == "float32"
    if content.startswith('{"another'):
        assert verdicts["another CPU | torch 1.0"]["choice"] == "bfloat16"  # other machines' verdicts are kept


def test_the_machine_key_names_the_bf16_flags_and_not_the_threads(monkeypatch):
    monkeypatch.setattr(precision, "_cpuinfo", lambda: ("AMD EPYC", ["avx2"]))
    avx2 = machine_key()
    monkeypatch.setattr(precision, "_cpuinfo", lambda: ("AMD EPYC", ["avx2", "avx512_bf16"]))
    assert machine_key() != avx2 and "avx512_bf16" in machine_key()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)  # a Ray actor with other threads makes the same choice
        assert "avx512_bf16" in machine_key()
        assert machine_key() == f"AMD EPYC [avx2 avx512_bf16] | torch {torch.__version__}"
    finally:
        torch.set_num_threads(threads)


def test_a_real_measurement_is_positive_and_finite():
    for dtype in (torch.float32, torch.bfloat16):
        t = matmul_seconds(dtype, shape=(64, 64, 64), reps=3)
        assert 0 < t < 10
