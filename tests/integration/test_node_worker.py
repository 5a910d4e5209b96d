"""The node worker answers relayed messages exactly as the ClientApp would in its own process, says
clearly when it is missing or fails, cleans up its socket, and refuses a socket another worker holds."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from flwr.app import MessageType

from fedloom.apps.node import answer
from fedloom.errors import ConfigError
from fedloom.runtime.flower.node import DOWNLOAD
from fedloom.runtime.flower.records import from_recorddict
from fedloom.runtime.flower.relay import WorkerError, WorkerUnavailableError, relay
from fedloom.runtime.flower.worker import NodeWorker
from tests.conftest import small_config
from tests.integration.flower_check import messages

pytestmark = pytest.mark.integration


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "sock" / "node.sock"
    with NodeWorker(path, answer) as w:
        thread = threading.Thread(target=w.serve_forever, daemon=True)
        thread.start()
        yield path
        w.shutdown()
        thread.join(10)
    assert not path.exists()


def test_relayed_answers_equal_answers_in_process(worker, tmp_path):
    query, train = messages(small_config(method="fedavg"))
    node = {"partition-id": 0, "state-dir": str(tmp_path / "relayed")}
    got = relay(str(worker), MessageType.QUERY, query, node)
    want = answer(MessageType.QUERY, query, node)
    assert dict(got.config_records["client"]) == dict(want.config_records["client"])

    up = relay(str(worker), MessageType.TRAIN, train, node)
    here = answer(MessageType.TRAIN, train, {**node, "state-dir": str(tmp_path / "here")})
    relayed, local = from_recorddict(up, DOWNLOAD), from_recorddict(here, DOWNLOAD)
    assert relayed.tensors.keys() == local.tensors.keys() and relayed.scalars == local.scalars
    for key, value in local.tensors.items():
        assert torch.equal(relayed.tensors[key], value), key
    assert any((tmp_path / "relayed").rglob("tensors.safetensors"))  # the worker kept the private state


def test_worker_failure_and_absence_are_clear_errors(worker, tmp_path):
    query, _ = messages(small_config(method="fedavg"))
    with pytest.raises(WorkerError, match="partition-id 99"):
        relay(str(worker), MessageType.QUERY, query, {"partition-id": 99})
    assert relay(str(worker), MessageType.QUERY, query, {"partition-id": 1}).config_records  # still serving
    with pytest.raises(WorkerUnavailableError, match="fedloom node-worker --socket"):
        relay(str(tmp_path / "nobody.sock"), MessageType.QUERY, query, {"partition-id": 0})


def test_socket_claims(worker, tmp_path):
    with pytest.raises(ConfigError, match="already listens"):
        NodeWorker(worker, answer)
    stale = tmp_path / "stale.sock"
    stale.write_bytes(b"")  # a killed worker's leftover: nobody accepts on it
    with NodeWorker(stale, answer):
        assert stale.is_socket()


def test_cli_worker_stops_cleanly_on_sigterm(tmp_path):
    path = tmp_path / "w.sock"
    proc = subprocess.Popen([sys.executable, "-m", "fedloom.cli", "node-worker", "--socket", str(path)])
    deadline = time.monotonic() + 120
    while not path.is_socket():
        assert proc.poll() is None and time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.1)
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0 and not Path(path).exists()


def test_a_client_that_goes_away_mid_message_leaves_the_worker_serving(worker, capfd):
    import socket as sockets

    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as s:  # half a frame, then gone
        s.connect(str(worker))
        s.sendall(b"\x00\x00\x00")
    query, _ = messages(small_config(method="fedavg"))
    assert relay(str(worker), MessageType.QUERY, query, {"partition-id": 0}).config_records
    assert "Traceback" not in capfd.readouterr().err
