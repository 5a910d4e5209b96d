"""The self-describing run directory: resolved config, environment, per-round metrics, summary, report.

runs/demo/
  .fedloom-run    written first: the top-level names this run wrote (an overwrite deletes only these) and
                  the PID of the process that holds the directory
  config.yaml     the fully resolved configuration (re-runnable with --config)
  env.json        versions, CPU, threads, dtype
  metrics.jsonl   one record per round
  summary.json    final metrics, per-client metrics, communication, wall time
  report.md       the table printed at the end
  daily.csv ...   test outputs of the chosen and final rounds (financial datasets: daily series, each client's
                  daily series in clients.csv, portfolio)
  <name>.json/png what the method declares at the end (`RunReport`: RPA's routes, FedWeave's alignment)
  adapter/        the final global adapter in PEFT format (methods with a global model)
  checkpoints/    round checkpoints (`fedloom.runtime.checkpoint`)
  resumes.jsonl   one line per resume: the round it continued from and the keys it changed

A run holds its directory for as long as it goes on (`claim_run_dir` for a fresh run, `hold_run_dir` to
continue one): an exclusive lock, so a second run into the same folder is refused with the first one's
PID. A fresh run refuses a directory that already holds files unless asked to overwrite it, and an
overwrite deletes only the names the marker lists: a folder without the marker is not a run directory
and is never touched.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import platform
import shutil
import socket
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, ClassVar

import torch

from fedloom.errors import ConfigError
from fedloom.paths import atomic_write
from fedloom.runs.config import RunConfig, dump_config
from fedloom.runs.label import JOB_FILE
from fedloom.runtime.checkpoint import CheckpointStore
from fedloom.runtime.rounds import RoundRecord

MARKER = ".fedloom-run"  # what makes a folder a run directory: who holds it, and the names fedloom wrote there
LABELS = (JOB_FILE,)  # written beside a run by `fedloom suite` before the run starts: not run data, kept
PACKAGES = ("fedloom", "torch", "transformers", "peft", "flwr", "numpy", "pandas", "scikit-learn", "pydantic",
            "lightgbm", "xgboost-cpu", "catboost")  # fmt: skip


class RunDirectory:
    """Writes one run's files; every write goes through a temporary file and a rename, and every
    top-level name is recorded in the marker before it is written (`own`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self._owned: set[str] = set(_read_marker(path).get("files", []))
        self.checkpoints = CheckpointStore(self.own("checkpoints"))

    def own(self, name: str) -> Path:
        """The path of ``name`` (relative) in the run directory; its top-level entry is recorded as the run's."""
        top = Path(name).parts[0]
        if top not in self._owned:
            self._owned.add(top)
            marker = _read_marker(self.path)
            _write_marker(self.path, {**marker, "files": sorted({*marker.get("files", []), top})})
        return self.path / name

    def start_metrics(self, history: list[RoundRecord]) -> None:
        """(Re)write metrics.jsonl with the rounds already done: none for a fresh run."""
        atomic_write(self.own("metrics.jsonl"), "".join(json.dumps(_finite(r.to_json())) + "\n" for r in history))

    def write_config(self, cfg: RunConfig) -> None:
        atomic_write(self.own("config.yaml"), dump_config(cfg))

    def write_env(self, extra: dict[str, Any]) -> None:
        atomic_write(self.own("env.json"), json.dumps({**environment(), **extra}, indent=2))

    def append_metrics(self, record: RoundRecord) -> None:
        with self.own("metrics.jsonl").open("a") as f:
            f.write(json.dumps(_finite(record.to_json())) + "\n")

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write(self.own("summary.json"), json.dumps(_finite(summary), indent=2))

    def write_json(self, name: str, value: Any) -> None:
        atomic_write(self.own(name), json.dumps(_finite(value), indent=2))

    def write_daily(self, daily: Any, name: str = "daily.csv") -> None:
        """A date-indexed DataFrame (daily test series, daily portfolio report) as CSV."""
        atomic_write(self.own(name), daily.to_csv(index_label="date"))

    def write_report(self, markdown: str) -> None:
        atomic_write(self.own("report.md"), markdown)

    def record_resume(self, from_round: int, changes: dict[str, tuple[str, str]]) -> None:
        """Append one line to resumes.jsonl: where this segment continued and which keys it changed."""
        line = {"from_round": from_round, "changed": {k: {"was": a, "now": b} for k, (a, b) in changes.items()}}
        with self.own("resumes.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")


class RunLock:
    """An exclusive lock on a run directory, held for a run's lifetime (``with claim_run_dir(out): ...``):
    ``flock`` on the directory itself, so it creates no file and ends with its process, however that
    ends. Re-entrant within a process: a command that holds a folder may call code that claims it again."""

    _held: ClassVar[dict[Path, RunLock]] = {}

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd, self.depth = path, fd, 1

    @classmethod
    def acquire(cls, path: Path) -> RunLock:
        key = path.resolve()
        if key in cls._held:
            cls._held[key].depth += 1
            return cls._held[key]
        fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = _read_marker(path).get("pid")
            who = f"fedloom process {owner}" if owner else "another fedloom process"
            raise ConfigError(f"run directory {path} is in use by {who}; wait for it to end or choose "
                              "another --out") from None  # fmt: skip
        cls._held[key] = lock = cls(key, fd)
        return lock

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            del self._held[self.path]
            os.close(self.fd)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def claim_run_dir(path: Path, overwrite: bool = False) -> RunLock:
    """Make ``path`` ready for a fresh run and hold it (a context manager): refused while another run
    holds it, refused when it already holds files unless ``overwrite`` — and then only a fedloom run
    directory, of which only the names its marker lists are deleted; checked to be writable."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {path} is a file; choose another --out")
    ensure_writable(path)
    lock = RunLock.acquire(path)
    try:
        held = sorted(p.name for p in path.iterdir() if p.name not in (MARKER, *LABELS))
        if held and not overwrite:
            shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
            raise ConfigError(
                f"run directory {path} already holds files ({shown}); continue that run with --resume {path}, "
                "choose a new --out, or pass --overwrite to delete it first"
            )
        if held:
            _clear(path, held)
        _write_marker(path, {**_owner(), "files": []})
    except BaseException:
        lock.release()
        raise
    return lock


def hold_run_dir(path: Path) -> RunLock:
    """Hold an existing run directory to continue or re-evaluate it (a context manager); its files stay."""
    if not path.is_dir():
        raise ConfigError(f"{path} is not a run directory")
    lock = RunLock.acquire(path)
    try:
        _write_marker(path, {"files": [], **_read_marker(path), **_owner()})
    except BaseException:
        lock.release()
        raise
    return lock


def _owner() -> dict[str, Any]:
    """Who holds the directory: shown to a second run that is refused."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def _clear(path: Path, held: list[str]) -> None:
    """Delete the entries of ``held`` the marker lists as the run's; refuse a folder without the marker
    (not a run directory: a project folder with a stray config.yaml, a home folder)."""
    if not (path / MARKER).is_file():
        raise ConfigError(
            f"{path} holds files but is not a fedloom run directory (no {MARKER}, which every run writes "
            "first); --overwrite deletes only run directories: choose another --out"
        )
    owned = set(_read_marker(path).get("files", []))
    for name in (n for n in held if n in owned):
        target = path / name
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()


def _read_marker(path: Path) -> dict[str, Any]:
    try:
        marker = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _write_marker(path: Path, marker: dict[str, Any]) -> None:
    atomic_write(path / MARKER, json.dumps(marker, indent=1) + "\n")


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
