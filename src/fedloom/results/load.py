"""The only reader of run folders: a finished run (summary.json, metrics.jsonl, daily.csv, job.json) as
a `RunResult` that tables, comparisons and reports read, and — for a notebook — a folder of runs as
pandas frames (`load`). A broken run is skipped by name, never a traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fedloom.errors import ConfigError
from fedloom.runs.label import JOB_FILE, JobLabel

DAILY_FILES = {False: "daily.csv", True: "daily_final.csv"}  # the bootstrap's series: chosen / final round
CLIENT_FILES = {False: "clients.csv", True: "clients_final.csv"}  # each client's of the same (`client_daily_metrics`)

log = logging.getLogger("fedloom")


@dataclass(frozen=True)
class RunResult:
    """One finished run as a table reads it."""

    path: Path
    row: str
    seed: int
    dataset: str
    record: Mapping[str, Any]  # summary.json + "derived" (per client-round costs) + "last_round"
    daily: pd.DataFrame | None
    daily_file: str = DAILY_FILES[False]
    clients: pd.DataFrame | None = None  # clients.csv: date-indexed with a ``client`` column (older runs: none)


def find_runs(paths: Iterable[Path], evaluations: bool = False, final: bool = False) -> list[RunResult]:
    """Every finished run under ``paths`` (run directories or folders holding them, e.g. a suite's);
    with ``evaluations``, each re-evaluation in ``RUN/evaluations/`` is a row of its own; with ``final``,
    the daily series are the final-round models' (``daily_final.csv``)."""
    found: list[RunResult] = []
    for path in paths:
        if not path.is_dir():
            raise ConfigError(f"{path}: no such run or suite directory")
        summaries = (
            [path / "summary.json"] if (path / "summary.json").is_file() else sorted(path.rglob("summary.json"))
        )
        for summary in summaries:
            try:
                run = load_run(summary.parent, final)
            except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:  # truncated, {}, a cut line
                log.warning("skipped %s: not a readable run (%s: %s)", summary.parent, type(exc).__name__, exc)
                continue
            found.append(run)
            if evaluations:
                found += [_evaluation(run, e) for e in sorted((run.path / "evaluations").glob("*.json"))]
    if not found:
        raise ConfigError(f"no finished run (summary.json) under {', '.join(map(str, paths))}")
    return found


def load_run(path: Path, final: bool = False) -> RunResult:
    """A run directory's summary, its per client-round costs, its last round and its daily series, the
    universe's and each client's (the chosen round's, or with ``final`` the last round's)."""
    summary = json.loads((path / "summary.json").read_text())
    rounds = [json.loads(line) for line in _lines(path / "metrics.jsonl")]
    label = JobLabel.model_validate_json((path / JOB_FILE).read_text()) if (path / JOB_FILE).is_file() else None
    name = DAILY_FILES[final]
    daily_file = path / name
    daily = pd.read_csv(daily_file, index_col="date", parse_dates=["date"]) if daily_file.is_file() else None
    client_file = path / CLIENT_FILES[final]
    clients = (pd.read_csv(client_file, index_col="date", parse_dates=["date"], dtype={"client": str})
               if client_file.is_file() else None)  # fmt: skip
    record = {**summary, "derived": per_client_round(summary, rounds), "last_round": rounds[-1] if rounds else {}}
    row = label.row if label else path.name
    return RunResult(path, row, int(summary["seed"]), summary["dataset"], record, daily, name, clients)


NESTED_SECONDS = ("client_compute", "aggregate")  # parts of a round's "local" and "server" time


def round_seconds(record: Mapping[str, Any]) -> float:
    """Wall seconds of one logged round: its phases (local work, server, evaluation) without the nested ones."""
    return sum(v for k, v in record.get("seconds", {}).items() if k not in NESTED_SECONDS)


def per_client_round(summary: Mapping[str, Any], rounds: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """KB down / up per participating client and round (eq. 28) and wall seconds per round.

    Participations are counted from metrics.jsonl (clients that received a download); without it,
    every client in every round. Seconds come from the logged rounds (a resumed run's summary counts
    only the resumed process), else the run's wall time over its rounds."""
    participations = sum(len(r.get("download_bytes", {})) for r in rounds)
    timed = [r for r in rounds if r.get("seconds")]
    participations = participations or int(summary["rounds"]) * max(1, len(summary.get("per_client", {})))
    comm = summary["communication"]
    return {
        "download_kb": comm["download_bytes"] / participations / 1e3,
        "upload_kb": comm["upload_bytes"] / participations / 1e3,
        "seconds_per_round": (sum(map(round_seconds, timed)) / len(timed) if timed
                              else summary["wall_seconds"] / max(1, int(summary["rounds"]))),
    }  # fmt: skip


def _evaluation(run: RunResult, path: Path) -> RunResult:
    """A re-evaluation of ``run``'s checkpoint as a run of its own row (test metrics only)."""
    evaluation = json.loads(path.read_text())
    row = f"{run.row} @ {', '.join(evaluation['overrides']) or 'as trained'}"
    return RunResult(path, row, run.seed, run.dataset, {"metrics": evaluation["metrics"]}, None)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


@dataclass(frozen=True)
class Runs:
    """Finished runs as pandas frames, for a notebook: ``summary`` one row per run (run folder, row, method,
    dataset, seed and every number of summary.json flattened to dotted columns), ``rounds`` one row per
    logged round of each run (metrics.jsonl's round summaries and train losses) and ``daily`` the daily
    test series of each run's reported models (daily.csv), all keyed by the run's folder."""

    summary: pd.DataFrame
    rounds: pd.DataFrame
    daily: pd.DataFrame


def load(*paths: Path | str, final: bool = False) -> Runs:
    """Every finished run under ``paths`` (run folders or folders holding them) as frames (`Runs`); with
    ``final``, the daily series of the final-round models (daily_final.csv)."""
    runs = find_runs([Path(p) for p in paths], final=final)
    summary = pd.json_normalize([{"run": str(r.path), "row": r.row, **_plain(r.record)} for r in runs])
    rounds = pd.DataFrame([{"run": str(r.path), "round": rec["round"], **rec.get("summary", {}),
                            "train_loss": _mean_loss(rec)} for r in runs for rec in _records(r.path)])  # fmt: skip
    daily = [r.daily.assign(run=str(r.path)).reset_index() for r in runs if r.daily is not None]
    return Runs(summary, rounds, pd.concat(daily, ignore_index=True) if daily else pd.DataFrame())


def _plain(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("per_client", "last_round")}


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(path / "metrics.jsonl")]


def _mean_loss(record: Mapping[str, Any]) -> float:
    losses = [v["train_loss"] for v in record.get("train", {}).values() if v.get("train_loss") is not None]
    return float(sum(losses) / len(losses)) if losses else float("nan")
