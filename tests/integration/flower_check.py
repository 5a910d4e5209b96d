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

# SecAgg+'s quantization step (16 / 2^22 ≈ 3.8e-6, stochastically rounded) against a one-round update of
# lr 2e-4 × 2 steps ≈ 4e-4 per element is ~1 %: measured up to 0.7 % on the adapter-movement diagnostics
# (`adapter/val/contribution/worst25`, 4 runs), where the weights themselves agree within 2e-5
SECAGG_REL_UPDATE = 3e-2


def assert_same_run(
    cfg: RunConfig,
    tmp_path: Path,
    on_flower: Callable[[Any, Path], None],
    atol: float = 1e-6,
    rel: float = 1e-4,
    rel_update: float | None = None,
) -> dict:
    """Run ``cfg`` in process and via ``on_flower(workspace, out)``; assert the same sampled clients,
    upload bytes, final adapters (within ``atol``) and metrics (within ``rel``; the adapter-movement
    diagnostics ``adapter/…`` within ``rel_update`` when given: they measure the update alone, ‖ΔW‖ and the
    predictions' change, so an error in the weights is relative to the update's size, not the weights').
    Returns the Flower run's summary."""
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
        tol = rel_update if rel_update is not None and key.startswith("adapter/") else rel
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
