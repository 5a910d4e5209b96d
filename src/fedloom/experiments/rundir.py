"""The self-describing run directory: resolved config, environment, per-round metrics, summary, report.

runs/demo/
  config.yaml     the fully resolved configuration (re-runnable with --config)
  env.json        versions, CPU, threads, dtype
  metrics.jsonl   one record per round
  summary.json    final metrics, per-client metrics, communication, wall time
  report.md       the table printed at the end
  adapter/        the final global adapter in PEFT format (methods with a global model)
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from fedloom.experiments.config import RunConfig, dump_config
from fedloom.runtime.checkpoint import CheckpointStore
from fedloom.runtime.rounds import RoundRecord

PACKAGES = ("fedloom", "torch", "transformers", "peft", "flwr", "numpy", "pandas", "scikit-learn", "pydantic")


class RunDirectory:
    """Writes one run's files; every write goes through a temporary file and a rename."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.checkpoints = CheckpointStore(path / "checkpoints")

    def start_metrics(self, history: list[RoundRecord]) -> None:
        """(Re)write metrics.jsonl with the rounds already done: none for a fresh run."""
        atomic_write(self.path / "metrics.jsonl", "".join(json.dumps(_finite(r.to_json())) + "\n" for r in history))

    def write_config(self, cfg: RunConfig) -> None:
        atomic_write(self.path / "config.yaml", dump_config(cfg))

    def write_env(self, extra: dict[str, Any]) -> None:
        atomic_write(self.path / "env.json", json.dumps({**environment(), **extra}, indent=2))

    def append_metrics(self, record: RoundRecord) -> None:
        with (self.path / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(_finite(record.to_json())) + "\n")

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write(self.path / "summary.json", json.dumps(_finite(summary), indent=2))

    def write_json(self, name: str, value: Any) -> None:
        atomic_write(self.path / name, json.dumps(_finite(value), indent=2))

    def write_daily(self, daily: Any) -> None:
        """Daily test series (date-indexed DataFrame) as daily.csv."""
        atomic_write(self.path / "daily.csv", daily.to_csv(index_label="date"))

    def write_report(self, markdown: str) -> None:
        atomic_write(self.path / "report.md", markdown)


def environment() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "packages": versions,
        "git_commit": _git_commit(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _finite(value: Any) -> Any:
    """JSON has no NaN: non-finite floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
