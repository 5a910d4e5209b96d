"""Issue 44 / seed 000 Table 2: summary.json counts the parameters each client trains, whatever the
method, from what its optimizers actually step (and the closed-form head): a frozen LoRA A (FFA-LoRA) is
not counted, a second local model (Ditto) is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedloom.backbone.lora import lora_a_key, lora_b_key
from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from fedloom.tasks.learner import HEAD_PREFIX
from tests.conftest import small_config


@pytest.fixture(scope="module")
def counts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = {}
    for method in ("fedavg", "ffa-lora", "local"):
        cfg = small_config(method=method, rounds=1)
        ws = prepare_workspace(cfg)
        summary = run_method(cfg, ws, Path(tmp_path_factory.mktemp(method)))
        layout = next(iter(ws.learners.values())).lm.layout
        a = sum(_numel(ws, lora_a_key(m.path)) for m in layout.modules)
        b = sum(_numel(ws, lora_b_key(m.path)) for m in layout.modules)
        out[method] = {"summary": summary, "a": a, "b": b, "head": _head_numel(ws)}
    return out


def _numel(ws, key: str) -> int:
    return int(ws.shared_init[key].numel())


def _head_numel(ws) -> int:
    learner = next(iter(ws.learners.values()))
    head = learner.init_head(torch.Generator().manual_seed(0))
    return sum(int(v.numel()) for k, v in head.items() if k.startswith(HEAD_PREFIX))


def test_fedavg_counts_both_lora_factors_and_the_private_head(counts):
    c = counts["fedavg"]
    trained = c["summary"]["trainable_params"]
    assert trained["mean"] == trained["max"] == c["a"] + c["b"] + c["head"]
    assert set(trained["per_client"]) == set(c["summary"]["per_client"])


def test_ffa_lora_does_not_count_its_frozen_a(counts):
    c = counts["ffa-lora"]
    assert c["summary"]["trainable_params"]["mean"] == c["b"] + c["head"]


def test_local_only_trains_what_fedavg_trains(counts):
    assert counts["local"]["summary"]["trainable_params"] == counts["fedavg"]["summary"]["trainable_params"]
