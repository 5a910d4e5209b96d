"""Flower's simulation engine (flwr 1.42, Message API, Ray backend) runs the same round loop and
algorithm objects as the in-process runtime: same sampled clients, same final adapters, same metrics,
the same run directory (`fedloom flower-sim` beside `fedloom run`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from fedloom.algorithms.base import Record
from fedloom.runs.config import dump_config
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


def simulate(cfg, ws, out) -> None:
    """``cfg`` on Flower's simulation engine, one SuperNode per client."""
    from flwr.simulation import run_simulation

    from fedloom.apps.clientapp import make_client_app
    from fedloom.apps.serverapp import make_server_app

    run_simulation(
        server_app=make_server_app(cfg, len(ws.learners), out),
        client_app=make_client_app(),
        num_supernodes=len(ws.learners),
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}},
    )


# what a Flower run directory lacks (README, "What travels"): outputs that need every client's state or
# test predictions in one place
IN_PROCESS_ONLY = {"daily.csv", "daily_final.csv", "clients.csv", "clients_final.csv", "routes.json", "routes.png"}


def flower_sim_command(cfg, tmp_path):
    """``fedloom flower-sim --config`` as a user runs it, on ``cfg`` written out as a config file."""
    config = tmp_path / "config.yaml"
    config.write_text(dump_config(cfg))

    def run(ws, out) -> None:
        cmd = [sys.executable, "-m", "fedloom.cli", "flower-sim", "--config", str(config), "--workers", "2",
               "--out", str(out)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)  # Ray starts slowly when busy
        assert proc.returncode == 0, proc.stderr[-2000:]

    return run


# fedavg: through the command line (the same run directory as `fedloom run`);
# fedbiot: a server that computes with the model (emulator alignment)
@pytest.mark.parametrize("method", ["fedavg", "rpa", "fedweave", "fedbiot"])
def test_flower_simulation_equals_in_process(method, tmp_path):
    cfg = small_config(**{"method": method, "federation.fraction": 0.67, "router_hidden": 16})
    on_flower = flower_sim_command(cfg, tmp_path) if method == "fedavg" else lambda ws, out: simulate(cfg, ws, out)
    got = assert_same_run(cfg, tmp_path, on_flower)
    files = {d: {p.name for p in (tmp_path / d).iterdir()} for d in ("in-process", "flower")}
    assert files["in-process"] - IN_PROCESS_ONLY <= files["flower"] and got["method"] == method
    expected = json.loads((tmp_path / "in-process" / "summary.json").read_text())
    assert got["communication"] == expected["communication"]


def test_shrunk_intercepts_on_flower_equal_in_process(tmp_path):
    """train.head_intercept: shrunk on Flower: the nodes' sums come back by QUERY and (μ, τ²) rides on every
    message, so a client sampled first in round 2 starts its head where it does in process."""
    sets = {"method": "fedavg", "federation.fraction": 0.67, "train.head_start": "ridge",
            "train.head_intercept": "shrunk"}  # fmt: skip
    cfg = small_config(**sets)
    got = assert_same_run(cfg, tmp_path, lambda ws, out: simulate(cfg, ws, out))
    expected = json.loads((tmp_path / "in-process" / "summary.json").read_text())
    assert got["communication"] == expected["communication"]
    first = json.loads((tmp_path / "flower" / "metrics.jsonl").read_text().splitlines()[0])
    assert first["diagnostics"]["federation_mean/clients"] == 3


@pytest.mark.parametrize("method", ["fedavg", "rpa"])
def test_secagg_plus_on_flower_equals_the_in_process_arithmetic(method, tmp_path):
    """Flower's SecAgg+ (masked, quantized uploads; the server unmasks only their weighted sum) ends
    where the in-process weighted mean does, within the quantization error (2^22 levels over ±8)."""
    # one round: a second would let Adam's sign-like steps amplify the quantization noise
    cfg = small_config(**{"method": method, "rounds": 1, "federation.secure_aggregation.enabled": True})
    got = assert_same_run(cfg, tmp_path, lambda ws, out: simulate(cfg, ws, out), secagg=True)
    log = [json.loads(line) for line in (tmp_path / "flower" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["aggregated"] and set(r["bytes_by_group"]["upload"]) == {"masked"} for r in log)
    assert got["method"] == method


def test_a_wrong_shaped_upload_from_a_node_is_rejected_and_logged(tmp_path):
    """A node whose reply carries a mis-shaped tensor (a Flower mod corrupts it on the way out) is
    rejected server-side with the reason in metrics.jsonl; the others are aggregated as usual."""
    import numpy as np
    from flwr.app import Array, Message
    from flwr.simulation import run_simulation

    from fedloom.apps.clientapp import make_client_app
    from fedloom.apps.serverapp import make_server_app
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.flower.node import DOWNLOAD

    def corrupt(msg, context, call_next) -> Message:
        out = call_next(msg, context)
        if msg.metadata.message_type == "train" and int(context.node_config["partition-id"]) == 0:
            arrays = out.content.array_records[f"{DOWNLOAD}.tensors"]
            key = next(iter(arrays))
            arrays[key] = Array(np.zeros((1, 1), dtype=arrays[key].numpy().dtype))
        return out

    app = make_client_app(mods=[corrupt])
    cfg = small_config(rounds=1)
    ws = prepare_workspace(cfg)
    run_simulation(
        server_app=make_server_app(cfg, len(ws.learners), tmp_path),
        client_app=app,
        num_supernodes=len(ws.learners),
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}},
    )
    (record,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    bad = sorted(ws.learners)[0]
    assert set(record["rejected"]) == {bad} and "shape" in record["rejected"][bad]
    assert record["aggregated"] and set(record["train"]) == set(ws.learners)
