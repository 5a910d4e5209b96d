"""The one comparison engine: how a row of runs differs from a reference row. The paired block bootstrap
over trading weeks of the seed-mean daily series (seed 000, Table 5) — over clients and weeks at once where
the runs wrote each client's daily series (clients.csv) — with a paired t-test over seeds, and
each client's gain over the reference against its heterogeneity (seed 000, Fig. 4). Tables, the HTML
report and `fedloom compare`'s report.md all render these numbers; none computes its own."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from fedloom.metrics.cross_section import CLIENT_WEIGHTS, POOLED, moment_columns
from fedloom.metrics.significance import (
    paired_block_bootstrap,
    paired_cluster_bootstrap,
    paired_pooled_bootstrap,
    paired_t_test,
)
from fedloom.results.load import RunResult
from fedloom.runs.report import summary_key

DEFAULT_REFERENCE = "fedavg"  # the method a comparison is against when no reference row is named
ROW_FIELD = "{row}"  # in a reference: each row against the row its own name makes, e.g. "{row}-fixed"
WEEKS, CLIENTS_WEEKS = "weeks", "clients × weeks"  # what a comparison's bootstrap resampled


@dataclass(frozen=True)
class Comparison:
    """Paired bootstrap of a row's seed-mean daily series against the reference row's — over trading weeks,
    or over clients and weeks jointly where every run of both rows has the column per client
    (``resampled``; ``week_p_value`` then keeps the weeks-only p) — a paired t-test over the seeds of the
    per-seed means (``seed_p_value``: NaN with fewer than two seeds) and one over the clients of their
    seed-mean test metric (``client_p_value`` over ``clients``: `compare_clients`)."""

    mean_difference: float
    ci_low: float
    ci_high: float
    p_value: float
    days: int
    seeds: int
    seed_p_value: float = math.nan
    q_value: float = math.nan  # Benjamini–Hochberg over the rows compared in one table (`corrected`)
    holm_p: float = math.nan  # Holm's step-down adjusted p over the same rows
    mde: float = math.nan  # minimum detectable effect at 80 % power, two-sided 5 %, from the bootstrap's SE
    client_p_value: float = math.nan
    clients: int = 0
    resampled: str = WEEKS
    week_p_value: float = math.nan  # the weeks-only bootstrap's p when ``resampled`` is clients × weeks


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error): the i-th smallest p (i = 1..m) times
    m − i + 1, made non-decreasing in that order and capped at 1, returned in the input order."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    steps = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted


def corrected(comparisons: Sequence[Comparison | None]) -> list[Comparison | None]:
    """One table's comparisons (one per row; None where a row is not compared) with the family's
    Benjamini–Hochberg q (``scipy.stats.false_discovery_control``) and Holm adjusted p filled in: a table of
    many rows tests many differences, and a raw p < 0.05 among them is expected by chance."""
    from scipy.stats import false_discovery_control  # on use: `fedloom table` starts light

    tested = [i for i, c in enumerate(comparisons) if c is not None and math.isfinite(c.p_value)]
    if not tested:
        return list(comparisons)
    p = [comparisons[i].p_value for i in tested]  # type: ignore[union-attr]
    q, h = false_discovery_control(p, method="bh"), holm(p)
    out = list(comparisons)
    for k, i in enumerate(tested):
        out[i] = replace(out[i], q_value=float(q[k]), holm_p=float(h[k]))  # type: ignore[type-var]
    return out


def compare_daily(rows: Sequence[RunResult], reference: Sequence[RunResult], column: str) -> Comparison | None:
    """Bootstrap of the seed-mean daily ``column`` over the seeds both rows ran — over clients and weeks
    where `client_cells` has the column's cells or `pooled_moments` the universe-wide column's moments, else
    over weeks; None without common seeds or with fewer than two trading weeks of common days."""
    mine, theirs = _by_seed(rows, column), _by_seed(reference, column)
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    a = pd.concat([mine[s] for s in seeds], axis=1).mean(axis=1)
    b = pd.concat([theirs[s] for s in seeds], axis=1).mean(axis=1)
    try:
        t = paired_block_bootstrap(a, b)
    except ValueError:  # fewer than two common days
        return None
    if t["weeks"] < 2:  # one block: every draw is the observed mean, no spread to test against
        return None
    pairs = [pd.concat([mine[s], theirs[s]], axis=1).dropna() for s in seeds]  # each seed on its common days
    by_seed = paired_t_test([p.iloc[:, 0].mean() for p in pairs], [p.iloc[:, 1].mean() for p in pairs])
    weeks = Comparison(
        t["mean_difference"], t["ci_low"], t["ci_high"], t["p_value"], int(t["days"]), len(seeds), by_seed["p_value"],
        mde=t["mde"],
    )  # fmt: skip
    cells, moments = client_cells(rows, reference, column, seeds), pooled_moments(rows, reference, column, seeds)
    c: dict[str, float] | None
    try:
        if cells is not None:
            c = paired_cluster_bootstrap(*cells)
        else:
            c = paired_pooled_bootstrap(*moments) if moments is not None else None
    except ValueError:  # one client, or one week, with cells or moments
        c = None
    if c is None:
        return weeks
    return replace(
        weeks, mean_difference=c["mean_difference"], ci_low=c["ci_low"], ci_high=c["ci_high"], p_value=c["p_value"],
        mde=c["mde"], resampled=CLIENTS_WEEKS, week_p_value=t["p_value"],
    )  # fmt: skip


def client_cells(
    rows: Sequence[RunResult], reference: Sequence[RunResult], column: str, seeds: Sequence[int]
) -> tuple[pd.Series, pd.Series] | None:
    """The (date, client) cells of the seed-mean difference in ``column`` and each cell's share of its day
    (`CLIENT_WEIGHTS`: an equal share per client with a value, or the client's share of the day's rows), so
    that the weighted mean is the mean over days of the daily difference; None unless ``column`` splits by
    client and every run of both rows on ``seeds`` wrote it in clients.csv."""
    if column not in CLIENT_WEIGHTS:
        return None
    mine, theirs = _clients_by_seed(rows, ["rows", column]), _clients_by_seed(reference, ["rows", column])
    if not all(s in mine and s in theirs for s in seeds):
        return None
    a, b = (pd.concat([side[s] for s in seeds]).groupby(level=[0, 1]).mean() for side in (mine, theirs))
    d = (a[column] - b[column]).dropna()
    if CLIENT_WEIGHTS[column] == "clients":
        share = 1.0 / d.groupby(level=0).transform("count")
    else:
        rows_of = b["rows"].reindex(d.index)
        share = rows_of / rows_of.groupby(level=0).transform("sum")
    return d, share


def pooled_moments(
    rows: Sequence[RunResult], reference: Sequence[RunResult], column: str, seeds: Sequence[int]
) -> tuple[list[np.ndarray], list[np.ndarray], pd.DatetimeIndex] | None:
    """Per seed, each row's clients × days × `MOMENTS` of the universe-wide ``column`` (``*_pooled``) on one
    client order and the days both rows have, for `paired_pooled_bootstrap`; None unless ``column`` is pooled and
    every run of both rows on ``seeds`` wrote its moments in clients.csv."""
    if not column.endswith(POOLED):
        return None
    names = moment_columns(column)
    mine, theirs = _clients_by_seed(rows, names), _clients_by_seed(reference, names)
    if not all(s in mine and s in theirs for s in seeds):
        return None
    frames = [side[s] for side in (mine, theirs) for s in seeds]
    clients = sorted({str(c) for f in frames for c in f.index.get_level_values(1)})
    days = sorted(set.intersection(*(set(f.index.get_level_values(0)) for f in frames)))
    grid = pd.MultiIndex.from_product([days, clients])
    arrays = [
        f.groupby(level=[0, 1])[names].sum().reindex(grid, fill_value=0.0).to_numpy()
        .reshape(len(days), len(clients), len(names)).transpose(1, 0, 2)
        for f in frames
    ]  # fmt: skip
    return arrays[: len(seeds)], arrays[len(seeds) :], pd.DatetimeIndex(days)


def _clients_by_seed(runs: Sequence[RunResult], columns: Sequence[str]) -> dict[int, pd.DataFrame]:
    """Per seed, clients.csv's ``columns`` indexed by (date, client), for the runs that wrote them all."""
    return {
        r.seed: r.clients.set_index("client", append=True)[list(columns)]
        for r in runs
        if r.clients is not None and all(c in r.clients for c in columns)
    }


def compare_clients(rows: Sequence[RunResult], reference: Sequence[RunResult], metric: str) -> dict[str, float]:
    """Paired t-test over clients of each client's test ``metric`` (summary.json ``per_client``), seed mean
    over the seeds both rows ran (`client_gains`): does the difference hold across the data owners, or does
    one client carry it? The pooled days cannot say — one client's offset moves every week alike. Returns
    ``mean_difference``, ``p_value`` and the number of clients ``n``."""
    gains = [g for g in client_gains(rows, reference, f"test/{metric}").values() if math.isfinite(g)]
    return paired_t_test(gains, [0.0] * len(gains))


def _by_seed(runs: Sequence[RunResult], column: str) -> dict[int, pd.Series]:
    return {r.seed: r.daily[column] for r in runs if r.daily is not None and column in r.daily}


def reference_row(rows: Mapping[str, Sequence[RunResult]], reference: str | None = None) -> str | None:
    """The row a comparison is against: ``reference`` where given (and a row), else the row whose runs
    are all of `DEFAULT_REFERENCE`'s method; None when there is none."""
    if reference is not None:
        return reference if reference in rows else None
    return next((row for row, runs in rows.items() if all(r.record.get("method") == DEFAULT_REFERENCE for r in runs)),
                None)  # fmt: skip


def partners(rows: Mapping[str, Sequence[RunResult]], reference: str | None = None) -> dict[str, str]:
    """The row each row is compared with. A reference holding ``{row}`` is a template: each row against
    the row it names (``{row}-fixed``: every partition's RPA against its fixed-route twin, seed 000
    Table 9; ``{row}-nores``: against the variant without the residual, Fig. 4), rows it names no row for
    are not compared; any other reference: every other row against that row (`reference_row`).

    >>> partners({"iid": [], "iid-fixed": [], "sector": []}, "{row}-fixed")
    {'iid': 'iid-fixed'}
    """
    if reference is not None and ROW_FIELD in reference:
        named = {row: reference.replace(ROW_FIELD, row) for row in rows}
        return {row: other for row, other in named.items() if other in rows and other != row}
    base = reference_row(rows, reference)
    return {} if base is None else {row: base for row in rows if row != base}


def paired_gain(run: RunResult, partner: RunResult, metric: str) -> dict[str, float]:
    """One seed's gain of ``run`` over ``partner`` (the same seed of the row it is compared with): the
    headline test ``metric``'s difference (``gain``; seed 000 Table 9's "gain over uniform route") and
    the Spearman ρ between the clients' heterogeneity scores (eq. 26) and their gains (eq. 27)
    (``heterogeneity_rho``; Table 9's last column, Fig. 4). NaN where either run lacks the value."""
    key = summary_key(metric)
    mine, theirs = run.record.get("metrics", {}).get(key), partner.record.get("metrics", {}).get(key)
    gain = float(mine) - float(theirs) if mine is not None and theirs is not None else math.nan
    per_client = client_gains([run], [partner], f"test/{metric}")
    scores = heterogeneity([run])
    clients = sorted(per_client)
    rho, _ = gain_correlation([scores.get(c, math.nan) for c in clients], [per_client[c] for c in clients])
    return {"gain": gain, "heterogeneity_rho": rho}


def client_gains(runs: Sequence[RunResult], base: Sequence[RunResult], key: str) -> dict[str, float]:
    """Per client, the seed mean of ``key`` (a per-client metric, e.g. ``test/ic``) minus the reference
    row's, over the seeds both ran."""
    theirs = {r.seed: r.record["per_client"] for r in base}
    diffs: dict[str, list[float]] = {}
    for run in runs:
        if run.seed not in theirs:
            continue
        for client, values in run.record.get("per_client", {}).items():
            a, b = values.get(key), theirs[run.seed].get(client, {}).get(key)
            if a is not None and b is not None:
                diffs.setdefault(client, []).append(float(a) - float(b))
    return {c: float(np.mean(v)) for c, v in diffs.items()}


def heterogeneity(runs: Sequence[RunResult]) -> dict[str, float]:
    """Each client's heterogeneity score (seed 000, eq. 26) as a run of ``runs`` recorded it."""
    return {c: float(v["heterogeneity"]) for c, v in runs[0].record.get("per_client", {}).items()
            if v.get("heterogeneity") is not None}  # fmt: skip


def gain_correlation(heterogeneity: Sequence[float], gains: Sequence[float]) -> tuple[float, int]:
    """Spearman ρ between clients' heterogeneity scores and gains over the finite pairs, and their
    number (seed 000 Fig. 4); NaN with fewer than three pairs or a constant side (e.g. a method whose
    gain over FedAvg is 0 for every client), where ρ is undefined."""
    from scipy.stats import spearmanr  # scipy.stats (~0.3 s): imported only by comparisons, not by every run

    ok = [(h, g) for h, g in zip(heterogeneity, gains, strict=True) if math.isfinite(h) and math.isfinite(g)]
    varies = len(ok) > 2 and len({h for h, _ in ok}) > 1 and len({g for _, g in ok}) > 1
    rho = spearmanr([h for h, _ in ok], [g for _, g in ok]).statistic if varies else math.nan
    return float(rho), len(ok)


UNIVERSE_WIDE = {"rank_ic": f"rank_ic{POOLED}"}  # ranking: Qlib's daily RankIC of the whole universe (issue 43)


def client_metric(column: str) -> str:
    """The per-client test metric behind a daily column: the universe-wide series' client counterpart
    (``rank_ic_pooled`` → ``rank_ic``), else the column itself (``mse``, ``accuracy``)."""
    return column.removesuffix(POOLED)


def daily_column(runs: Sequence[RunResult]) -> str | None:
    """The daily series a comparison bootstraps: for a ranking run the universe-wide RankIC (every client's
    names ranked as one cross-section a day, Qlib's measure: a client of a few names has a noisy RankIC of
    its own), else the primary metric's where daily.csv has it, else its first column (classification:
    accuracy). ``fedloom table --daily rank_ic`` tests the client macro instead."""
    run = next((r for r in runs if r.daily is not None and len(r.daily.columns)), None)
    if run is None:
        return None
    assert run.daily is not None
    primary = str(run.record.get("primary_metric"))
    for name in (UNIVERSE_WIDE.get(primary), primary):
        if name in run.daily.columns:
            return name
    return str(run.daily.columns[0])
