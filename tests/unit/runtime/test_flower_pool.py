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
    """Two nodes; ``broken`` answers TRAIN and EVALUATE without its ``metrics`` record; ``query`` replaces
    fields of a node's QUERY reply (node → fields; None: the field is left out)."""

    def __init__(self, broken: int, query: dict[int, dict] | None = None, nodes: dict[int, str] = NODES) -> None:
        self.broken, self.query, self.nodes = broken, query or {}, nodes

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def send_and_receive(self, messages, timeout=None):
        return [self._answer(m) for m in messages]

    def _answer(self, msg):
        node = msg.metadata.dst_node_id
        kind = msg.metadata.message_type
        if kind == "query" and "ask" in msg.content.config_records:  # mean sums: bob's are malformed
            sums = {"count": 1.0, "w": 2.0, "wy": 2.0, "wyy": 2.0, "ww": 4.0}
            content = RecordDict({"mean_sums": ConfigRecord(sums if node == 1 else {**sums, "w": float("nan")})})
        elif kind == "query":
            info = {"client_id": self.nodes[node], "primary_metric": "ic", "synthetic": True,
                    "size/train": 4, "size/val": 2, "size/test": 2, **self.query.get(node, {})}  # fmt: skip
            content = RecordDict({"client": ConfigRecord({k: v for k, v in info.items() if v is not None})})
        elif kind == "train":
            content = to_recorddict(Record({"w": torch.ones(2)}, {"num_examples": 4}), torch.float32, DOWNLOAD)
            content["metrics"] = MetricRecord({"loss": 0.5})
        else:
            content = RecordDict({"metrics": MetricRecord({"personal/val/mse": 0.1, "personal/test/mse": 0.2})})
        if node == self.broken and kind != "query":
            del content["metrics"]
        return SimpleNamespace(content=content, metadata=SimpleNamespace(src_node_id=node), has_error=lambda: False)


@pytest.fixture
def server_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("_run_id", "_node_id", "_task_id"):  # what a ServerApp process has set
        monkeypatch.setattr(TaskIdentity, key, 1)


@pytest.fixture
def pool(server_process) -> FlowerClients:
    return FlowerClients(FakeGrid(broken=2), "", FederationConfig(), "key", num_nodes=2, connect_timeout=5)


def test_a_train_reply_without_metrics_fails_that_client_only(pool):
    downloads = {c: Record({"w": torch.zeros(2)}) for c in NODES.values()}
    results = pool.train(1, downloads)
    assert results["alice"].failure is None and torch.equal(results["alice"].upload.tensors["w"], torch.ones(2))
    assert results["bob"].upload is None and "malformed reply" in results["bob"].failure


def test_an_evaluation_without_metrics_leaves_that_client_out(pool):
    evaluation = pool.evaluate(1, Record(), {c: Record() for c in NODES.values()})
    assert evaluation["personal"]["test"] == {"alice": {"mse": 0.2}}


@pytest.mark.parametrize(
    "poison", [{"client_id": None}, {"size/val": "lots"}, {"size/train": -1}, {"synthetic": "yes"}, {"client_id": 7}]
)
def test_a_malformed_query_reply_leaves_that_node_out_and_the_run_goes_on(server_process, caplog, poison):
    grid = FakeGrid(broken=0, query={2: poison})
    pool = FlowerClients(grid, "", FederationConfig(), "key", num_nodes=2, connect_timeout=5)
    assert pool.ids == ["alice"] and pool.sizes["val"] == {"alice": 2}
    assert "node 2 sent a malformed QUERY reply" in caplog.text
    grid.nodes = {**NODES, 3: "carol"}  # a node joining mid-run with a poisoned reply is left out too
    grid.query[3] = poison
    results = pool.train(1, {"alice": Record({"w": torch.zeros(2)})})
    assert results["alice"].failure is None and "carol" not in pool.nodes and "node 3 sent" in caplog.text


def test_mean_sums_come_back_checked_and_the_shared_mean_rides_on_every_message(pool, caplog):
    """head_intercept: shrunk on Flower: a QUERY asks each node for its five sums; a malformed answer leaves
    that client out (logged); once shared, (μ, τ²) travels in every message's run record."""
    from fedloom.tasks.intercept import FederationMean, MeanSums

    assert pool.mean_sums() == {"alice": MeanSums(1.0, 2.0, 2.0, 2.0, 4.0)}
    assert "client bob sent malformed mean sums" in caplog.text
    assert "federation_mean" not in pool.run_record(1)
    pool.share_federation_mean(FederationMean(0.5, 0.25))
    assert list(pool.run_record(3)["federation_mean"]) == [0.5, 0.25]


def test_a_node_answers_the_mean_sums_query_and_starts_its_head_from_the_shared_mean(tmp_path):
    """The node's side: its sums of its own training targets, and the run record's (μ, τ²) set on its learner
    before the client's state is first made."""
    import numpy as np

    from fedloom.runtime.flower.node import Federation, Node
    from fedloom.tasks.intercept import FederationMean, MeanSums

    targets = np.array([0.01, -0.02, 0.03, 0.0])
    seen = []
    learner = SimpleNamespace(mean_sums=lambda: MeanSums.of(targets), federation_mean=None)
    algorithm = SimpleNamespace(init_client=lambda init, lrn, gen: seen.append(lrn.federation_mean) or Record())
    fed = Federation(algorithm=algorithm, learners={"alice": learner}, shared_init={}, seed=0,  # type: ignore[arg-type]
                     wire=torch.float32, synthetic=False)  # fmt: skip
    node = Node(lambda config, node_config: fed)
    run = {"round": 0, "config": "", "run_key": "0" * 32}
    ask = RecordDict({"run": ConfigRecord(run), "ask": ConfigRecord({"what": "mean_sums"})})
    reply = node.query(ask, {"partition-id": 0, "state-dir": str(tmp_path)})
    assert dict(reply.config_records["mean_sums"]) == MeanSums.of(targets).as_dict()
    shared = RecordDict({"run": ConfigRecord({**run, "round": 1, "federation_mean": [0.5, 0.25]})})
    node._client_state(shared, {"partition-id": 0, "state-dir": str(tmp_path)}, 1)
    assert seen == [FederationMean(0.5, 0.25)]
