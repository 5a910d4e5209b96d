"""`--track mlflow`: a tiny run logged to a local MLflow store and read back with MLflow's own client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedloom.errors import ConfigError
from fedloom.results.tracking import check_tracker, log_run
from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config


def test_a_logged_run_reads_back_with_mlflow(tmp_path: Path):
    from mlflow.tracking import MlflowClient

    cfg = small_config(rounds=3, method="fedavg")
    run_dir = tmp_path / "run"
    run_method(cfg, prepare_workspace(cfg), run_dir)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    run_id = log_run(run_dir, uri, experiment="tiny")

    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.data.params["rounds"] == "3" and run.data.params["method"] == "fedavg"
    assert run.data.params["train.steps"] == "2" and run.data.tags["dataset"] == "synthetic"
    history = client.get_metric_history(run_id, "personal/test/ic/macro")
    rounds = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = sorted((m.step, m.value) for m in history)
    assert [step for step, _ in logged] == [r["round"] for r in rounds] == [1, 2, 3]
    assert [v for _, v in logged] == pytest.approx([r["summary"]["personal/test/ic/macro"] for r in rounds])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert run.data.metrics["chosen/round"] == summary["selection"]["best_round"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"summary.json", "report.md", "config.yaml", "metrics.jsonl"} <= artifacts
    assert not artifacts & {"checkpoints", "adapter"}
    assert json.loads(Path(client.download_artifacts(run_id, "summary.json", str(tmp_path))).read_text()) == summary


def test_an_unknown_tracker_is_refused_before_anything_runs():
    with pytest.raises(ConfigError, match="--track 'wandb': unknown tracker; choose from mlflow"):
        check_tracker("wandb")
