"""The check every Flower test makes: a run on Flower equals the same run in process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from flwr.app import ConfigRecord, RecordDict

from fedloom.algorithms.registry import build_algorithm
from fedloom.runs.config import RunConfig, dump_config
from fedloom.runs.methods import method_context
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.flower.node import DOWNLOAD, RUN
from fedloom.runtime.flower.records import to_recorddict

# The tolerances of a run under SecAgg+ (`secagg=True`): its uploads are quantized (2^22 levels over ±8, a
# step of 16 / 2^22 ≈ 3.8e-6, stochastically rounded), so the weights agree within 2e-5 and the metrics within
# 1e-3 relative; the diagnostics that measure the one-round update alone (UPDATE_DIAGNOSTICS: lr 2e-4 × 2
# steps ≈ 4e-4 a weight, against which the step is ~1 %) within 3e-2 — measured up to 0.7 %
# (`adapter/val/contribution/worst25`, 4 runs)
SECAGG_ATOL, SECAGG_REL, SECAGG_REL_UPDATE = 2e-5, 1e-3, 3e-2
UPDATE_DIAGNOSTICS = {"delta_w_rel_mean", "delta_w_rel_max", "contribution"}  # `Learner.adapter_movement`'s


def assert_same_run(
    cfg: RunConfig, tmp_path: Path, on_flower: Callable[[Any, Path], None], secagg: bool = False
) -> dict:
    """Run ``cfg`` in process and via ``on_flower(workspace, out)``; assert the same sampled clients,
    upload bytes, final adapters (within ``atol``) and metrics (within ``rel``); ``secagg``: the Flower run's
    uploads went through SecAgg+, so the quantization's tolerances apply (SECAGG_*), the update diagnostics'
    relative to the update's size, not the weights'. Returns the Flower run's summary."""
    atol, rel = (SECAGG_ATOL, SECAGG_REL) if secagg else (1e-6, 1e-4)
    rel_update = SECAGG_REL_UPDATE if secagg else rel
    from fedloom.runs.llm import run_method
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.checkpoint import CheckpointStore

    ws = prepare_workspace(cfg)
    expected = run_method(cfg, ws, tmp_path / "in-process")
    on_flower(ws, tmp_path / "flower")
    got = json.loads((tmp_path / "flower" / "summary.json").read_text())
    rounds = [[json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
              for d in ("in-process", "flower")]  # fmt: skip
    assert [r["selected"] for r in rounds[0]] == [r["selected"] for r in rounds[1]]
    assert all(not r["failures"] and not r["rejected"] for r in rounds[1])
    assert [r["upload_bytes"] for r in rounds[0]] == [r["upload_bytes"] for r in rounds[1]]
    a = CheckpointStore(tmp_path / "in-process" / "checkpoints").load().server.tensors
    b = CheckpointStore(tmp_path / "flower" / "checkpoints").load().server.tensors
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(b[key], a[key], atol=atol, rtol=1e-5)
    assert set(got["metrics"]) == set(expected["metrics"])
    for key, value in expected["metrics"].items():
        parts = key.split("/")
        tol = rel_update if parts[0] == "adapter" and parts[2] in UPDATE_DIAGNOSTICS else rel
        assert got["metrics"][key] == pytest.approx(value, rel=tol, abs=atol, nan_ok=True), key
    return got


RUN_KEY = "0" * 32  # a run key as the server makes them (uuid4().hex)


def messages(cfg: RunConfig, run_key: str = RUN_KEY) -> tuple[RecordDict, RecordDict]:
    """A QUERY and a round-1 TRAIN message of ``cfg`` for its first client, as the server builds them."""
    ws = prepare_workspace(cfg)
    ids = sorted(ws.learners)
    algorithm = build_algorithm(cfg.method, method_context(cfg, ws.lm.layout.slot()))
    download = algorithm.configure(algorithm.init_server(ws.shared_init, ids), ids[:1], 1)[ids[0]]

    def run(rnd: int) -> ConfigRecord:
        return ConfigRecord({"round": rnd, "config": dump_config(cfg), "run_key": run_key})

    train = to_recorddict(download, torch.bfloat16, DOWNLOAD)
    train[RUN] = run(1)
    return RecordDict({RUN: run(0)}), train
