"""The report of a method comparison (`fedloom compare`'s report.md), rendered from the comparison engine
(`fedloom.results.compare`): the method table, each method's per-client gain over the reference row
against the client's heterogeneity, and the paired block bootstrap against it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fedloom.results.compare import (
    client_gains,
    compare_daily,
    corrected,
    daily_column,
    gain_correlation,
    heterogeneity,
)
from fedloom.results.compare import reference_row as find_reference
from fedloom.results.load import RunResult
from fedloom.results.render import format_p
from fedloom.runs.report import fmt, markdown, method_table


def comparison_report(runs: Sequence[RunResult], reference: str | None = None) -> str:
    """The method table of ``runs`` (one seed each, one row per method) and, where the reference row ran
    (default: FedAvg), each method's per-client gain over it and its bootstrap against it."""
    s0 = runs[0].record
    label = " (SYNTHETIC data)" if s0["synthetic"] else ""
    rows = {run.row: [run] for run in runs}
    base = find_reference(rows, reference)
    return (
        f"# Method comparison on {s0['dataset']}{label}\n\n"
        f"Backbone `{s0['backbone']}`, {s0['rounds']} rounds, seed {s0['seed']}; personalized test metrics at "
        "the round with the best validation score (column `round`; IC / RankIC: macro mean over clients of "
        "the mean daily correlation; MSE / MAE: weighted by test rows).\n\n"
        + markdown(method_table([dict(run.record) for run in runs]))
        + ("" if base is None else gain_section(rows, base) + significance_section(rows, base))
    )


def significance_section(rows: Mapping[str, Sequence[RunResult]], base: str) -> str:
    """Paired block bootstrap over trading weeks (seed 000, Table 5) — over clients and weeks where the runs
    wrote clients.csv — of each row against ``base`` on the daily test series of the round chosen on
    validation (daily.csv)."""
    column = daily_column([run for runs in rows.values() for run in runs])
    if column is None:
        return ""
    table = []
    tests = corrected([None if row == base else compare_daily(runs, rows[base], column) for row, runs in rows.items()])
    for row, t in zip(rows, tests, strict=True):
        if t is not None:
            ci = f"[{fmt(t.ci_low)}, {fmt(t.ci_high)}]"
            table.append([row, fmt(t.mean_difference), ci, format_p(t.p_value), format_p(t.q_value), f"{t.days}",
                          t.resampled])  # fmt: skip
    if not table:
        return ""
    header = ["method", f"mean daily {column} − {base}", "95 % CI", "p", "q (BH over the rows)", "days", "resampled"]
    title = f"\n## Paired block bootstrap vs {base} (daily `{column}`, chosen round)\n\n"
    return title + markdown((header, table))


def gain_section(rows: Mapping[str, Sequence[RunResult]], base: str) -> str:
    """Each row's per-client gain over ``base`` beside the client's heterogeneity score (seed 000 Fig. 4)."""
    metric = f"test/{rows[base][0].record['primary_metric']}"
    scores = heterogeneity(rows[base])
    clients = sorted(rows[base][0].record["per_client"])
    others = [row for row in rows if row != base]
    gains = {row: client_gains(rows[row], rows[base], metric) for row in others}
    header = ["client", "heterogeneity", *(f"{row} − {base}" for row in others)]
    table = [[c, fmt(scores.get(c)), *(fmt(gains[row].get(c, math.nan)) for row in others)] for c in clients]
    notes = []
    for row in others:
        rho, n = gain_correlation([scores.get(c, math.nan) for c in clients],
                                  [gains[row].get(c, math.nan) for c in clients])  # fmt: skip
        notes.append(f"* {row}: Spearman ρ(heterogeneity, gain) = {fmt(rho)} over {n} clients")
    return (
        f"\n## Per-client gain in `{metric}` over {base}\n\n"
        + markdown((header, table))
        + "\n"
        + "\n".join(notes)
        + "\n"
    )
