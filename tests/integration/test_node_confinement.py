"""A data owner's node obeys only its owner: a coordinator's run config cannot make it read outside its
data folder or write outside its state folder, and nothing it sends back quotes its files or paths.
The probes of a hostile coordinator, run against the node's answer function (in process and relayed
through a node worker, as a SuperNode's ClientApp does)."""

from __future__ import annotations

import threading

import pytest
from flwr.app import ConfigRecord, MessageType, RecordDict

from fedloom.apps.node import answer
from fedloom.errors import NodeRefusedError
from fedloom.runs.config import dump_config
from fedloom.runtime.flower.node import RUN, NodeFailedError
from fedloom.runtime.flower.relay import WorkerError, relay
from fedloom.runtime.flower.worker import NodeWorker
from tests.conftest import small_config
from tests.integration.flower_check import RUN_KEY, messages

pytestmark = pytest.mark.integration
SECRET = "SECRET-ROW-0042"
COLUMNS = "{date: day, instrument: ticker, group: client, text: text, target: ret}"


@pytest.fixture
def owner(tmp_path):
    """An owner's data folder, and a payroll file beside it (outside) whose first row is secret."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "payroll.csv").write_text(f"day,ticker,client,text,ret\n2024-01-02,{SECRET},a,x,1\n")
    (tmp_path / "data").mkdir()
    return tmp_path


def query(path: str) -> RecordDict:
    """A QUERY whose run config (the coordinator's) reads ``data.generic.path``."""
    cfg = small_config(dataset="generic", **{"data.generic.path": path, "data.generic.columns": COLUMNS})
    return RecordDict({RUN: ConfigRecord({"round": 0, "config": dump_config(cfg), "run_key": RUN_KEY})})


def node(owner):
    return {"partition-id": 0, "data-dir": str(owner / "data"), "state-dir": str(owner / "state")}


@pytest.mark.parametrize("path", ["ABSOLUTE", "../outside/payroll.csv"])
def test_a_data_path_outside_the_data_folder_is_refused_without_reading_it(owner, path):
    path = str(owner / "outside" / "payroll.csv") if path == "ABSOLUTE" else path
    with pytest.raises(NodeRefusedError) as refused:
        answer(MessageType.QUERY, query(path), node(owner))
    assert str(refused.value).startswith("data.generic.path: a node reads only inside its own data folder")
    assert SECRET not in str(refused.value) and "outside" not in str(refused.value)


def test_a_failure_inside_the_data_folder_sends_back_no_file_content(owner):
    (owner / "data" / "panel.csv").write_text(f"day,ticker,client,text,ret\n{SECRET},T1,a,x,1\n")
    with pytest.raises(NodeFailedError) as failed:
        answer(MessageType.QUERY, query("panel.csv"), node(owner))
    assert str(failed.value).startswith("DataError while answering a query message")
    assert SECRET not in str(failed.value) and str(owner) not in str(failed.value)


def test_a_worker_relays_the_refusal_and_nothing_of_the_node(owner):
    path = owner / "w.sock"
    with NodeWorker(path, answer) as worker:
        thread = threading.Thread(target=worker.serve_forever, daemon=True)
        thread.start()
        try:
            (owner / "data" / "panel.csv").write_text(f"day,ticker,client,text,ret\n{SECRET},T1,a,x,1\n")
            for bad in (str(owner / "outside" / "payroll.csv"), "panel.csv"):
                with pytest.raises(WorkerError) as failed:
                    relay(str(path), MessageType.QUERY, query(bad), node(owner))
                text = str(failed.value)
                assert SECRET not in text and str(owner) not in text and "Traceback" not in text, text
        finally:
            worker.shutdown()
            thread.join(10)


def test_a_traversal_run_key_writes_nothing_outside_the_state_folder(owner):
    _, train = messages(small_config(method="fedavg"), run_key="../../victim")
    with pytest.raises(NodeRefusedError, match="run key"):
        answer(MessageType.TRAIN, train, node(owner))
    assert not list(owner.rglob("*victim*"))
    _, train = messages(small_config(method="fedavg"))
    assert answer(MessageType.TRAIN, train, node(owner)).array_records  # a real run key trains
    written = [p for p in owner.rglob("*") if p.is_file() and "outside" not in p.parts and "data" not in p.parts]
    assert written and all(p.is_relative_to(owner / "state" / RUN_KEY) for p in written), written
