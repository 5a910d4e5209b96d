"""The self-describing run directory: resolved config, environment, per-round metrics, summary, report.

runs/demo/
  config.yaml     the fully resolved configuration (re-runnable with --config)
  env.json        versions, CPU, threads, dtype
  metrics.jsonl   one record per round
  summary.json    final metrics, per-client metrics, communication, wall time
  report.md       the table printed at the end
  adapter/        the final global adapter in PEFT format (methods with a global model)
  resumes.jsonl   one line per resume: the round it continued from and the keys it changed

A fresh run claims its directory first (`claim_run_dir`): a directory that already holds files is
refused unless the caller asked to overwrite it, so two runs never mix their files.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from fedloom.errors import ConfigError
from fedloom.experiments.config import RunConfig, dump_config
from fedloom.experiments.suite_spec import JOB_FILE
from fedloom.runtime.checkpoint import CheckpointStore
from fedloom.runtime.rounds import RoundRecord

RUN_MARKERS = ("config.yaml", "metrics.jsonl", "summary.json", "checkpoints")  # what makes a folder a run directory
LABELS = (JOB_FILE,)  # written beside a run by `fedloom suite` before the run starts: not run data, kept
PACKAGES = ("fedloom", "torch", "transformers", "peft", "flwr", "numpy", "pandas", "scikit-learn", "pydantic",
            "lightgbm", "xgboost-cpu", "catboost")  # fmt: skip


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

    def write_daily(self, daily: Any, name: str = "daily.csv") -> None:
        """A date-indexed DataFrame (daily test series, daily portfolio report) as CSV."""
        atomic_write(self.path / name, daily.to_csv(index_label="date"))

    def write_report(self, markdown: str) -> None:
        atomic_write(self.path / "report.md", markdown)

    def record_resume(self, from_round: int, changes: dict[str, tuple[str, str]]) -> None:
        """Append one line to resumes.jsonl: where this segment continued and which keys it changed."""
        line = {"from_round": from_round, "changed": {k: {"was": a, "now": b} for k, (a, b) in changes.items()}}
        with (self.path / "resumes.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")


def claim_run_dir(path: Path, overwrite: bool = False) -> None:
    """Make ``path`` ready for a fresh run: refuse a folder that already holds files, unless ``overwrite``
    and it is a fedloom run directory (then it is deleted first); check that it can be written."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {path} is a file; choose another --out")
    held = sorted(p.name for p in path.iterdir() if p.name not in LABELS) if path.is_dir() else []
    if held and not overwrite:
        shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        raise ConfigError(
            f"run directory {path} already holds files ({shown}); continue that run with --resume {path}, "
            "choose a new --out, or pass --overwrite to delete it first"
        )
    if held:
        if not any((path / marker).exists() for marker in RUN_MARKERS):
            raise ConfigError(
                f"{path} holds files but is not a fedloom run directory (none of {', '.join(RUN_MARKERS)}); "
                "--overwrite deletes only run directories: choose another --out"
            )
        for name in held:
            target = path / name
            shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
    ensure_writable(path)


def ensure_writable(path: Path) -> None:
    """Create ``path`` and prove a file can be written there, so a run fails before its first round."""
    probe = path / ".fedloom-write-test"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"cannot write to the run directory {path}: {exc.strerror or exc}") from None


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
