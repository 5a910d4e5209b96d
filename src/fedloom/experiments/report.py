"""Result tables as plain rows, rendered to Markdown (report.md) or to the terminal by the CLI, and the
Markdown reports of one run and of a method comparison.

Columns follow the run's metrics: the primary metric (what validation selects rounds by) first,
then the others. Scores are macro means over clients; MSE and MAE are weighted by test rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedloom.metrics.significance import paired_block_bootstrap

Table = tuple[list[str], list[list[str]]]

WEIGHTED = ("mse", "mae")
ORDER = ("ic", "rank_ic", "icir", "rank_icir", "accuracy", "mcc", "mse", "mae", "score", "loss")
LABELS = {"ic": "IC", "rank_ic": "RankIC", "icir": "ICIR", "rank_icir": "RankICIR", "mse": "MSE", "mae": "MAE",
          "mcc": "MCC", "accuracy": "Acc"}  # fmt: skip


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


def client_table(summary: dict[str, Any]) -> Table:
    """Per-client test metrics of one run, then the macro / weighted / worst-quartile rows."""
    metrics = metric_names(summary)
    rows = [[c, *(fmt(v.get(f"test/{m}")) for m in metrics)] for c, v in sorted(summary["per_client"].items())]
    for kind in ("macro", "weighted", "worst25"):
        rows.append([f"**{kind}**", *(fmt(summary["metrics"].get(f"personal/test/{m}/{kind}")) for m in metrics)])
    return ["client", *(LABELS.get(m, m) for m in metrics)], rows


def method_table(summaries: Sequence[dict[str, Any]]) -> Table:
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


def markdown(table: Table) -> str:
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


def comparison_report(summaries: list[dict[str, Any]]) -> str:
    """The method table, and where FedAvg ran, each method's per-client gain over it beside the
    client's heterogeneity score (seed 000 eq. 26) with their Spearman correlation."""
    s0 = summaries[0]
    label = " (SYNTHETIC data)" if s0["synthetic"] else ""
    return (
        f"# Method comparison on {s0['dataset']}{label}\n\n"
        f"Backbone `{s0['backbone']}`, {s0['rounds']} rounds, seed {s0['seed']}; personalized test metrics at "
        "the round with the best validation score (column `round`; IC / RankIC: macro mean over clients of "
        "the mean daily correlation; MSE / MAE: weighted by test rows).\n\n"
        + markdown(method_table(summaries))
        + gain_section(summaries)
        + significance_section(summaries)
    )


def significance_section(summaries: list[dict[str, Any]]) -> str:
    """Paired block bootstrap over trading weeks (seed 000, Table 5) of each method against FedAvg on
    the daily test series of the round chosen on validation (daily.csv)."""
    daily = {s["method"]: Path(s["run_dir"]) / "daily.csv" for s in summaries}
    if "fedavg" not in daily or not all(p.is_file() for p in daily.values()):
        return ""
    frames = {m: pd.read_csv(p, index_col="date", parse_dates=["date"]) for m, p in daily.items()}
    primary = summaries[0]["primary_metric"]
    column = primary if primary in frames["fedavg"].columns else frames["fedavg"].columns[0]
    rows = []
    for method, frame in frames.items():
        if method == "fedavg" or column not in frame:
            continue
        try:
            t = paired_block_bootstrap(frame[column], frames["fedavg"][column])
        except ValueError:
            continue
        ci = f"[{fmt(t['ci_low'])}, {fmt(t['ci_high'])}]"
        rows.append([method, fmt(t["mean_difference"]), ci, fmt(t["p_value"]), f"{t['days']:.0f} / {t['weeks']:.0f}"])
    if not rows:
        return ""
    header = ["method", f"mean daily {column} − fedavg", "95 % CI", "p", "days / weeks"]
    return f"\n## Paired block bootstrap vs FedAvg (daily `{column}`, chosen round, weeks resampled)\n\n" + markdown(
        (header, rows)
    )


def gain_section(summaries: list[dict[str, Any]]) -> str:
    """Each method's per-client gain over FedAvg beside the client's heterogeneity score (seed 000 Fig. 5)."""
    base = next((s for s in summaries if s["method"] == "fedavg"), None)
    if base is None:
        return ""
    metric = f"test/{base['primary_metric']}"
    clients = sorted(base["per_client"])
    others = [s for s in summaries if s["method"] != "fedavg"]
    header = ["client", "heterogeneity", *(f"{s['method']} − fedavg" for s in others)]
    rows, notes = [], []
    for c in clients:
        row = [c, fmt(base["per_client"][c].get("heterogeneity"))]
        row += [fmt(_gain(s, base, c, metric)) for s in others]
        rows.append(row)
    for s in others:
        gains = [_gain(s, base, c, metric) for c in clients]
        het = [base["per_client"][c].get("heterogeneity", math.nan) for c in clients]
        rho, n = gain_correlation(het, gains)
        notes.append(f"* {s['method']}: Spearman ρ(heterogeneity, gain) = {fmt(rho)} over {n} clients")
    return (
        f"\n## Per-client gain in `{metric}` over FedAvg\n\n"
        + markdown((header, rows))
        + "\n"
        + "\n".join(notes)
        + "\n"
    )


def _gain(s: dict[str, Any], base: dict[str, Any], client: str, metric: str) -> float:
    a, b = s["per_client"].get(client, {}).get(metric), base["per_client"][client].get(metric)
    return float(a) - float(b) if a is not None and b is not None else math.nan


def gain_correlation(heterogeneity: Sequence[float], gains: Sequence[float]) -> tuple[float, int]:
    """Spearman ρ between clients' heterogeneity scores and gains over the finite pairs, and their
    number (seed 000 Fig. 5); NaN with fewer than three pairs or a constant side (e.g. a method whose
    gain over FedAvg is 0 for every client), where ρ is undefined."""
    from scipy.stats import spearmanr  # scipy.stats (~0.3 s): imported only by comparisons, not by every run

    ok = [(h, g) for h, g in zip(heterogeneity, gains, strict=True) if math.isfinite(h) and math.isfinite(g)]
    varies = len(ok) > 2 and len({h for h, _ in ok}) > 1 and len({g for _, g in ok}) > 1
    rho = spearmanr([h for h, _ in ok], [g for _, g in ok]).statistic if varies else math.nan
    return float(rho), len(ok)
