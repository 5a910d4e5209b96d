"""Flower's simulation engine (flwr 1.42, Message API, Ray backend) runs the same round loop and
algorithm objects as the in-process runtime: same sampled clients, same final adapters, same metrics."""

from __future__ import annotations

import pytest
import torch

from fedloom.algorithms.base import Record
from fedloom.runtime.flower.records import from_recorddict, to_recorddict
from tests.conftest import small_config
from tests.integration.flower_check import assert_same_run

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
    small, large = (to_recorddict(rec, w).array_records["record.tensors"].count_bytes() for w in WIRES)
    assert small < large
    both = to_recorddict(rec, torch.float32, "download")  # two named records share one message
    for key, value in to_recorddict(Record({"b": torch.ones(2)}), torch.float32, "server").items():
        both[key] = value
    assert torch.equal(from_recorddict(both, "server").tensors["b"], torch.ones(2))
    assert torch.equal(from_recorddict(both, "download").tensors["a"], rec.tensors["a"])


WIRES = (torch.bfloat16, torch.float32)


@pytest.mark.parametrize("method", ["fedavg", "rpa", "fedweave"])
def test_flower_simulation_equals_in_process(method, tmp_path):
    cfg = small_config(**{"method": method, "federation.fraction": 0.67, "router_hidden": 16})
    from flwr.simulation import run_simulation

    from fedloom.runtime.flower.apps import make_client_app, make_server_app

    def on_flower(ws, out):
        result: dict = {}
        run_simulation(
            server_app=make_server_app(cfg, len(ws.learners), out, result=result),
            client_app=make_client_app(),
            num_supernodes=len(ws.learners),
            backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}},
        )

    got = assert_same_run(cfg, tmp_path, on_flower)
    assert (tmp_path / "flower" / "report.md").is_file() and got["method"] == method
