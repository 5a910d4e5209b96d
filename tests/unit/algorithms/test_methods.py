"""Contract checks every method must pass, and FedAvg / Local-only rules on a real tiny workspace."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedloom.algorithms.base import NUM_EXAMPLES, LocalContext, Record
from fedloom.algorithms.registry import METHODS, build_algorithm
from fedloom.errors import ConfigError
from fedloom.runs.methods import method_context
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config


@pytest.fixture(scope="module")
def workspace():
    return prepare_workspace(small_config())


def _round(algorithm, ws, rnd=1):
    server = algorithm.init_server(ws.shared_init, list(ws.learners))
    states = {
        c: algorithm.init_client(ws.shared_init, lrn, torch.Generator().manual_seed(1))
        for c, lrn in ws.learners.items()
    }
    downloads = algorithm.configure(server, list(ws.learners), rnd)
    updates = {
        c: algorithm.local_update(downloads[c], states[c], LocalContext(lrn, rnd, torch.Generator().manual_seed(2)))
        for c, lrn in ws.learners.items()
    }
    return server, states, downloads, updates


@pytest.mark.parametrize("name", sorted(METHODS))
def test_contract(name, workspace):
    algorithm = build_algorithm(
        name, method_context(small_config(method=name), workspace.lm.layout.slot(), workspace.lm)
    )
    server, _, downloads, updates = _round(algorithm, workspace)
    for cid, upd in updates.items():
        assert not any(k.startswith("head.") for k in upd.upload.tensors), "heads must stay private"
        assert all(torch.isfinite(v).all() for v in upd.upload.tensors.values())
        assert "train_loss" in upd.metrics
        model = algorithm.client_model(downloads[cid], upd.state)
        assert "head.weight" in model.params
    new = algorithm.aggregate(server, {c: u.upload for c, u in updates.items()}, 1)
    assert isinstance(new, Record)


def test_fedavg_aggregates_the_sample_weighted_mean(workspace):
    algorithm = build_algorithm("fedavg", method_context(small_config()))
    server, _, downloads, updates = _round(algorithm, workspace)
    uploads = {c: u.upload for c, u in updates.items()}
    new = algorithm.aggregate(server, uploads, 1)
    n = {c: u.scalars[NUM_EXAMPLES] for c, u in uploads.items()}
    assert n == {c: len(lrn.data.train) for c, lrn in workspace.learners.items()}
    for key in server.tensors:
        by_hand = sum(n[c] * uploads[c].tensors[key] for c in uploads) / sum(n.values())
        torch.testing.assert_close(new.tensors[key], by_hand)
    assert set(new.tensors) == set(server.tensors)
    # clients trained: uploads differ from the download
    some_b = next(k for k in server.tensors if ".lora_B." in k)
    assert not torch.equal(
        uploads[next(iter(uploads))].tensors[some_b], downloads[next(iter(uploads))].tensors[some_b]
    )


def test_local_only_sends_nothing_and_keeps_its_adapter(workspace):
    algorithm = build_algorithm("local", method_context(small_config()))
    server, states, downloads, updates = _round(algorithm, workspace)
    for cid, upd in updates.items():
        assert not upd.upload.tensors and not upd.upload.scalars and not downloads[cid].tensors
        assert set(upd.state.tensors) == set(states[cid].tensors)
        key = next(k for k in upd.state.tensors if ".lora_B." in k)
        assert not torch.equal(upd.state.tensors[key], states[cid].tensors[key])
    assert algorithm.aggregate(server, {c: u.upload for c, u in updates.items()}, 1) is server


def test_unknown_method():
    with pytest.raises(ConfigError, match="unknown method 'fedsgd'; available: ditto, fdlora, "):
        build_algorithm("fedsgd", method_context(small_config()))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_two_rounds_end_to_end(name, workspace):
    """Every method runs two rounds on the tiny model through the runtime, with bytes recorded."""
    from fedloom.runtime.config import FederationConfig
    from fedloom.runtime.simulation import InProcessRuntime

    algorithm = build_algorithm(
        name, method_context(small_config(method=name), workspace.lm.layout.slot(), workspace.lm)
    )
    history = (
        InProcessRuntime(algorithm, workspace.learners, FederationConfig(), seed=0)
        .run(workspace.shared_init, rounds=2)
        .history
    )
    assert [r.round for r in history] == [1, 2]
    assert all(not r.failures and not r.rejected and r.aggregated for r in history)
    up = sum(sum(r.upload_bytes.values()) for r in history)
    assert (up == 0) == (name in ("local", "fedlease"))  # FedLEASE warms up locally for 5 rounds
    summary = history[-1].summary
    assert all(np.isfinite(summary[f"personal/test/{m}/macro"]) for m in ("mse", "mae"))
