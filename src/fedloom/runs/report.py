"""A run's result table as plain rows, rendered to Markdown (the run's report.md) or to the terminal by
the CLI; the label and formatting helpers every report of a run shares.

Columns follow the run's metrics: the primary metric (what validation selects rounds by) first,
then the others. Scores are macro means over clients; MSE and MAE are weighted by test rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Rows = tuple[list[str], list[list[str]]]  # a header and its rows of text cells

WEIGHTED = ("mse", "mae")
ORDER = ("ic", "rank_ic", "icir", "rank_icir", "mcc", "balanced_accuracy", "accuracy", "mse", "mae", "score", "loss")
LABELS = {"ic": "IC", "rank_ic": "RankIC", "icir": "ICIR", "rank_icir": "RankICIR", "mse": "MSE", "mae": "MAE",
          "mcc": "MCC", "accuracy": "Acc", "balanced_accuracy": "BAcc"}  # fmt: skip


def fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return str(value)


def metric_names(summary: dict[str, Any]) -> list[str]:
    """The test metrics of a summary, primary first."""
    names = {"/".join(k.split("/")[2:-1]) for k in summary["metrics"] if k.startswith("personal/test/")}
    ordered = sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    primary = summary.get("primary_metric")
    return ([primary] if primary in names else []) + [n for n in ordered if n != primary]


def summary_key(metric: str) -> str:
    """The summary entry a table shows for a test metric: MSE and MAE weighted by test rows, others macro."""
    return f"personal/test/{metric}/{'weighted' if metric in WEIGHTED else 'macro'}"


def client_table(summary: dict[str, Any]) -> Rows:
    """Per-client test metrics of one run, then the macro / weighted / worst-quartile rows."""
    metrics = metric_names(summary)
    rows = [[c, *(fmt(v.get(f"test/{m}")) for m in metrics)] for c, v in sorted(summary["per_client"].items())]
    for kind in ("macro", "weighted", "worst25"):
        rows.append([f"**{kind}**", *(fmt(summary["metrics"].get(f"personal/test/{m}/{kind}")) for m in metrics)])
    return ["client", *(LABELS.get(m, m) for m in metrics)], rows


def method_table(summaries: Sequence[dict[str, Any]]) -> Rows:
    """One row per method: test metrics at the selected round, worst quartile of the primary metric,
    bytes per round and wall time."""
    metrics = metric_names(summaries[0])
    primary = metrics[0] if metrics else ""
    header = ["method", "round", *(LABELS.get(m, m) for m in metrics), f"{LABELS.get(primary, primary)} worst25"]
    header += ["down MB/round", "up MB/round", "wall s"]
    rows = []
    for s in summaries:
        comm, rounds = s["communication"], max(1, s["rounds"])
        rows.append(
            [
                s["method"],
                str(s["selection"]["best_round"]),
                *(fmt(s["metrics"].get(summary_key(m))) for m in metrics),
                fmt(s["metrics"].get(f"personal/test/{primary}/worst25")),
                f"{comm['download_bytes'] / rounds / 1e6:.3f}",
                f"{comm['upload_bytes'] / rounds / 1e6:.3f}",
                f"{s['wall_seconds']:.1f}",
            ]
        )
    return header, rows


def markdown(table: Rows) -> str:
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def single_report(summary: dict[str, Any]) -> str:
    """report.md of one run: per-client test metrics, the method row and the portfolio line."""
    label = " (SYNTHETIC data)" if summary["synthetic"] else ""
    text = (
        f"# {summary['method']} on {summary['dataset']}{label}\n\n"
        f"Backbone `{summary['backbone']}`, {summary['rounds']} rounds, seed {summary['seed']}; "
        f"personalized evaluation on each client's test split at round {summary['selection']['best_round']}, "
        f"chosen by `{summary['selection']['metric']}`.\n\n"
        + markdown(client_table(summary))
        + "\n"
        + markdown(method_table([summary]))
    )
    rnd = summary.get("outputs_round", summary["rounds"])
    for key, models in (("portfolio", f"models of round {rnd}"), ("portfolio_final", "final models")):
        if key in summary:
            values = ", ".join(f"{k} {fmt(v)}" for k, v in summary[key].items())
            text += f"\nTopkDropout, excess return with cost ({models}): {values}\n"
    if "outputs_round" in summary:
        text += (f"\ndaily.csv (and the portfolio and regimes, where the data has them) come from the models of "
                 f"round {rnd}, the round the table reports; daily_final.csv (`*_final`) from the models after "
                 f"round {summary['rounds']}.\n")  # fmt: skip
    return text
