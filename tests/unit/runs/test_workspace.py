"""A workspace computes only the frozen features its run reads (issue 21): FedAvg with every layer
adapted runs no frozen pass at all; a method that routes on the frozen embedding gets it, once."""

from __future__ import annotations

import pytest
import torch

from fedloom.backbone import features as features_module
from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from fedloom.seeding import generator
from tests.conftest import small_config


@pytest.fixture
def embedding_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row count of every frozen-embedding pass the run makes."""
    calls: list[int] = []
    real = features_module.frozen_embedding

    def counted(lm, tokens, prefix, batch_size):
        calls.append(len(tokens))
        return real(lm, tokens, prefix, batch_size)

    monkeypatch.setattr(features_module, "frozen_embedding", counted)
    return calls


@pytest.mark.parametrize(("method", "passes"), [("fedavg", 0), ("fedweave", 1)])
def test_the_frozen_embedding_is_computed_only_for_a_method_that_reads_it(tmp_path, embedding_passes, method, passes):
    cfg = small_config(method=method, rounds=1, **{"adapter.layers": "all", "methods.fedweave.router_hidden": 8})
    ws = prepare_workspace(cfg)
    summary = run_method(cfg, ws, tmp_path / method)
    assert len(embedding_passes) == passes
    assert ws.setup_seconds.keys() >= {"features"} and summary["per_client"]
    assert all("heterogeneity" in m for m in summary["per_client"].values())  # the report field stays


@pytest.mark.parametrize("head_init", ["client", "shared"])
def test_a_shared_head_init_gives_every_client_the_same_starting_head(head_init):
    """``train.head_init=shared`` starts every private head from one seeded draw, whatever the client's
    own stream; the default draws each client's head from its own stream."""
    ws = prepare_workspace(small_config(**{"train.head_init": head_init}))
    heads = [lrn.init_head(generator(0, "init", cid)) for cid, lrn in ws.learners.items()]
    same = [all(torch.equal(h[k], heads[0][k]) for k in h) for h in heads[1:]]
    assert all(same) if head_init == "shared" else not any(same)
