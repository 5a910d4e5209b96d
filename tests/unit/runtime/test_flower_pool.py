"""A node reply missing a record fails that client only; the run goes on (no Flower processes: a fake Grid)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from flwr.app import ConfigRecord, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedloom.algorithms.base import Record
from fedloom.runtime.flower.node import DOWNLOAD
from fedloom.runtime.flower.pool import FlowerClients
from fedloom.runtime.flower.records import to_recorddict
from fedloom.runtime.rounds import FederationConfig

NODES = {1: "alice", 2: "bob"}


class FakeGrid:
    """Two nodes; ``broken`` answers TRAIN and EVALUATE without its ``metrics`` record."""

    def __init__(self, broken: int) -> None:
        self.broken = broken

    def get_node_ids(self) -> list[int]:
        return list(NODES)

    def send_and_receive(self, messages, timeout=None):
        return [self._answer(m) for m in messages]

    def _answer(self, msg):
        node = msg.metadata.dst_node_id
        kind = msg.metadata.message_type
        if kind == "query":
            info = {"client_id": NODES[node], "size/train": 4, "size/val": 2, "size/test": 2}
            content = RecordDict({"client": ConfigRecord(info)})
        elif kind == "train":
            content = to_recorddict(Record({"w": torch.ones(2)}, {"num_examples": 4}), torch.float32, DOWNLOAD)
            content["metrics"] = MetricRecord({"loss": 0.5})
        else:
            content = RecordDict({"metrics": MetricRecord({"personal/val/mse": 0.1, "personal/test/mse": 0.2})})
        if node == self.broken and kind != "query":
            del content["metrics"]
        return SimpleNamespace(content=content, metadata=SimpleNamespace(src_node_id=node), has_error=lambda: False)


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> FlowerClients:
    for key in ("_run_id", "_node_id", "_task_id"):  # what a ServerApp process has set
        monkeypatch.setattr(TaskIdentity, key, 1)
    return FlowerClients(FakeGrid(broken=2), "", FederationConfig(), "key", num_nodes=2, connect_timeout=5)


def test_a_train_reply_without_metrics_fails_that_client_only(pool):
    downloads = {c: Record({"w": torch.zeros(2)}) for c in NODES.values()}
    results = pool.train(1, downloads)
    assert results["alice"].failure is None and torch.equal(results["alice"].upload.tensors["w"], torch.ones(2))
    assert results["bob"].upload is None and "malformed reply" in results["bob"].failure


def test_an_evaluation_without_metrics_leaves_that_client_out(pool):
    evaluation = pool.evaluate(1, Record(), {c: Record() for c in NODES.values()})
    assert evaluation["personal"]["test"] == {"alice": {"mse": 0.2}}
