"""Issue 44 / seed 000 Table 2: summary.json counts the parameters each client trains, whatever the
method, from what its optimizers actually step (and the closed-form head): a frozen LoRA A (FFA-LoRA) is
not counted, a second model of the same tensor names (Ditto's personal model, FedDPA's local adapter) is,
and a tensor stepped by two fits in a row (FedRep's head, then its body) is counted once. `fedloom params`
matches ranks to a budget from these counts."""

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
    for method, rounds in (("fedavg", 1), ("ffa-lora", 1), ("local", 1), ("ditto", 1), ("feddpa", 2), ("fedrep", 1)):
        cfg = small_config(method=method, rounds=rounds)  # FedDPA trains its local adapter from round 2
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


def test_ditto_counts_its_personal_model_beside_the_global_one(counts):
    c = counts["ditto"]
    assert c["summary"]["trainable_params"]["mean"] == 2 * (c["a"] + c["b"] + c["head"])


def test_feddpa_counts_its_local_adapter_beside_the_global_one_and_its_head_once(counts):
    c = counts["feddpa"]
    assert c["summary"]["trainable_params"]["mean"] == 2 * (c["a"] + c["b"]) + c["head"]


def test_fedrep_counts_a_tensor_two_fits_step_once(counts):
    c = counts["fedrep"]
    assert c["summary"]["trainable_params"]["mean"] == c["a"] + c["b"] + c["head"]


def test_ranks_are_matched_to_the_budget_of_a_reference_method():
    """FedAvg at rank 4 is the budget; Ditto (two models) matches at rank 2, FFA-LoRA (B only) cannot come
    within 10 % at ranks 2 / 8 / 16 and gets the nearest."""
    from fedloom.runs.params import match_ranks

    cfg = small_config(method="fedavg", rounds=2)
    budget, matches = match_ranks(cfg, ["fedavg", "ditto", "ffa-lora"], "fedavg", [2, 8, 16])
    by = {m.method: m for m in matches}
    assert set(by) == {"ditto", "ffa-lora"}  # the reference is the budget, not a row to match
    ws = prepare_workspace(cfg)
    layout = next(iter(ws.learners.values())).lm.layout
    lora4 = sum(_numel(ws, lora_a_key(m.path)) + _numel(ws, lora_b_key(m.path)) for m in layout.modules)
    head = _head_numel(ws)
    assert budget == lora4 + head
    ditto = by["ditto"]
    assert ditto.rank == 2 and ditto.counts[2] == 2 * (lora4 // 2 + head) and ditto.within
    ffa = by["ffa-lora"]
    assert ffa.counts[16] == 2 * ffa.counts[8] - head  # B only: linear in the rank, plus the head
    assert ffa.rank == min(ffa.counts, key=lambda r: abs(ffa.counts[r] / budget - 1)) and not ffa.within
