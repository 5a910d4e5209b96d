"""The Flower compatibility check: FedAvg through Flower's simulation engine (flwr 1.42, Message API,
Ray backend) with the same algorithm objects and payloads ends with the same adapters as the
in-process runtime."""

from __future__ import annotations

import pytest
import torch

from fedloom.algorithms.base import Record
from fedloom.runtime.flower.records import from_recorddict, load_state, store_state, to_recorddict
from tests.conftest import small_config

pytestmark = pytest.mark.integration


def test_records_round_trip_exactly():
    g = torch.Generator().manual_seed(0)
    rec = Record(
        {"a": torch.randn(3, 4, generator=g), "ids": torch.tensor([3, 1], dtype=torch.int64)},
        {"num_examples": 7, "beta": 0.5, "name": "x", "flag": True},
    )
    back = from_recorddict(to_recorddict(rec, torch.bfloat16))
    assert torch.equal(back.tensors["a"], rec.tensors["a"].to(torch.bfloat16).float())
    assert torch.equal(back.tensors["ids"], rec.tensors["ids"]) and back.scalars == rec.scalars
    exact = from_recorddict(to_recorddict(rec, torch.float32))
    assert torch.equal(exact.tensors["a"], rec.tensors["a"])
    assert (
        to_recorddict(rec, torch.bfloat16).array_records["tensors"].count_bytes()
        < to_recorddict(rec, torch.float32).array_records["tensors"].count_bytes()
    )

    from flwr.app import RecordDict

    state = RecordDict()
    assert load_state(state) is None
    store_state(state, rec)
    assert torch.equal(load_state(state).tensors["a"], rec.tensors["a"])


def test_fedavg_on_flower_simulation_equals_in_process(tmp_path):
    from flwr.simulation import run_simulation

    from fedloom.algorithms.registry import build_algorithm
    from fedloom.experiments.runner import prepare_workspace
    from fedloom.runtime.flower.apps import make_client_app, make_server_app
    from fedloom.runtime.simulation import InProcessRuntime

    cfg = small_config(**{"federation.fraction": 0.67})
    ws = prepare_workspace(cfg)
    algorithm = build_algorithm("fedavg", cfg.build_context())
    expected = InProcessRuntime(algorithm, ws.learners, cfg.federation, cfg.seed).run(ws.shared_init, cfg.rounds)

    result: dict = {}
    run_simulation(
        server_app=make_server_app(cfg, len(ws.learners), result),
        client_app=make_client_app(cfg),
        num_supernodes=len(ws.learners),
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}},
    )
    assert [r["selected"] for r in result["log"]] == [r.selected for r in expected.history]
    assert all(not r["problems"] for r in result["log"])
    got = result["server"].tensors
    assert set(got) == set(expected.server.tensors)
    for key, value in expected.server.tensors.items():
        torch.testing.assert_close(got[key], value, atol=1e-6, rtol=1e-5)
