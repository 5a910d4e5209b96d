"""Result tables as plain rows, rendered to Markdown (report.md) or to the terminal by the CLI."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Table = tuple[list[str], list[list[str]]]

COLUMNS = (
    ("IC", "personal/test/ic/macro"),
    ("RankIC", "personal/test/rank_ic/macro"),
    ("IC worst25", "personal/test/ic/worst25"),
    ("MSE", "personal/test/mse/weighted"),
    ("MAE", "personal/test/mae/weighted"),
)


def fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return str(value)


def client_table(summary: dict[str, Any]) -> Table:
    """Per-client test metrics of one run, then the macro / weighted / worst-quartile rows."""
    metrics = ["ic", "rank_ic", "mse", "mae"]
    rows = [[c, *(fmt(v.get(f"test/{m}")) for m in metrics)] for c, v in sorted(summary["per_client"].items())]
    for kind in ("macro", "weighted", "worst25"):
        rows.append([f"**{kind}**", *(fmt(summary["metrics"].get(f"personal/test/{m}/{kind}")) for m in metrics)])
    return ["client", "IC", "RankIC", "MSE", "MAE"], rows


def method_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """One row per method: test metrics, bytes per round, wall time."""
    header = ["method", "round", *(name for name, _ in COLUMNS), "down MB/round", "up MB/round", "wall s"]
    rows = []
    for s in summaries:
        comm, rounds = s["communication"], max(1, s["rounds"])
        rows.append(
            [
                s["method"],
                str(s["selection"]["best_round"]),
                *(fmt(s["metrics"].get(key)) for _, key in COLUMNS),
                f"{comm['download_bytes'] / rounds / 1e6:.3f}",
                f"{comm['upload_bytes'] / rounds / 1e6:.3f}",
                f"{s['wall_seconds']:.1f}",
            ]
        )
    return header, rows


def markdown(table: Table) -> str:
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
