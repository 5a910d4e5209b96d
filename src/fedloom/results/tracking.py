"""Optional MLflow tracking of a finished run directory (``--track mlflow``).

One MLflow run per fedloom run: params = the resolved config (dotted keys, JSON values), metrics =
every round's summary, mean train loss, bytes and numeric diagnostics (step = round) plus the
headline numbers (``chosen/…`` at the round chosen on validation, ``portfolio/…``, ``regimes/…``),
artifacts = the run directory's reports (everything but checkpoints and the adapter). No server: by
default a SQLite store with its artifacts beside it under ``./mlruns`` (MLflow 3 keeps its plain file
store only behind ``MLFLOW_ALLOW_FILE_STORE``). MLflow is imported here only, when a run is tracked.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fedloom.errors import ConfigError
from fedloom.runs.config import load_config, settings

TRACKERS = ("mlflow",)
DEFAULT_ROOT = Path("mlruns")
EXPERIMENT = "fedloom"
LEFT_OUT = ("checkpoints", "adapter")  # model state, not reports
BATCH = {"metrics": 1000, "params": 100}  # MLflow's per-call limits of log_batch


def store(uri: str | None) -> tuple[str, str | None]:
    """The tracking URI and, for the default local store, where new experiments keep artifacts."""
    if uri is not None:
        return uri, None
    root = DEFAULT_ROOT.resolve()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}", (root / "artifacts").as_uri()


def check_tracker(tracker: str | None) -> None:
    """Refuse an unknown ``--track`` value before anything runs."""
    if tracker is not None and tracker not in TRACKERS:
        raise ConfigError(f"--track {tracker!r}: unknown tracker; choose from {', '.join(TRACKERS)}")


def log_run(run_dir: Path, uri: str | None = None, experiment: str = EXPERIMENT) -> str:
    """Log a finished run directory to MLflow; returns the MLflow run id."""
    import logging

    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # table creation notices on a new store
    summary = json.loads((run_dir / "summary.json").read_text())
    tracking_uri, artifacts = store(uri)
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment, artifacts)
    tags = {k: str(summary[k]) for k in ("method", "dataset", "seed", "backbone") if k in summary}
    name = f"{summary['method']}-{summary['dataset']}-seed{summary['seed']}"
    run_id: str = client.create_run(
        experiment_id, run_name=name, tags={**tags, "run_dir": str(run_dir.resolve())}
    ).info.run_id
    now = int(time.time() * 1000)
    params = [Param(k, _plain(v)[:6000]) for k, v in settings(load_config(run_dir / "config.yaml")).items()]
    metrics = [Metric(key, value, now, step) for key, value, step in run_metrics(run_dir, summary)]
    for i in range(0, len(params), BATCH["params"]):
        client.log_batch(run_id, params=params[i : i + BATCH["params"]])
    for i in range(0, len(metrics), BATCH["metrics"]):
        client.log_batch(run_id, metrics=metrics[i : i + BATCH["metrics"]])
    for path in sorted(run_dir.iterdir()):
        if path.name.startswith(".") or path.name in LEFT_OUT:
            continue
        if path.is_dir():
            client.log_artifacts(run_id, str(path), path.name)
        else:
            client.log_artifact(run_id, str(path))
    client.set_terminated(run_id)
    return run_id


def run_metrics(run_dir: Path, summary: Mapping[str, Any]) -> Iterator[tuple[str, float, int]]:
    """``(key, value, step)`` of every finite number tracked: per round from metrics.jsonl, then the
    summary's headline numbers at step 0."""
    file = run_dir / "metrics.jsonl"
    for line in file.read_text().splitlines() if file.is_file() else []:
        record = json.loads(line)
        step = int(record["round"])
        losses = [m["train_loss"] for m in record.get("train", {}).values() if m.get("train_loss") is not None]
        values = {
            **(record.get("summary") or {}),
            "train_loss": sum(losses) / len(losses) if losses else None,
            "download_bytes": sum(record.get("download_bytes", {}).values()),
            "upload_bytes": sum(record.get("upload_bytes", {}).values()),
            **{f"seconds/{k}": v for k, v in record.get("seconds", {}).items()},
            **{f"diagnostics/{k}": v for k, v in (record.get("diagnostics") or {}).items()},
        }
        yield from _numbers(values, step)
    headline = {
        **{f"chosen/{k}": v for k, v in summary.get("metrics", {}).items()},
        "chosen/round": summary.get("selection", {}).get("best_round"),
        **{f"portfolio/{k}": v for k, v in (summary.get("portfolio") or {}).items()},
        **{f"regimes/{k}": v for k, v in (summary.get("regimes") or {}).items()},
        "wall_seconds": summary.get("wall_seconds"),
    }
    yield from _numbers(headline, 0)


def _plain(text: str) -> str:
    """A config value as MLflow shows it: strings without their JSON quotes, everything else as JSON."""
    value = json.loads(text)
    return value if isinstance(value, str) else text


def _numbers(values: Mapping[str, Any], step: int) -> Iterator[tuple[str, float, int]]:
    """The finite scalars of ``values`` under keys MLflow accepts (lists and nested values are left out)."""
    for key, value in values.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            yield re.sub(r"[^A-Za-z0-9_\-./ ]", "_", key), float(value), step
