"""Paired comparison of two daily metric series with a block bootstrap over trading weeks (seed 000, Table 5).

For methods A and B with daily values on the same test days (e.g. daily RankIC), d_t = a_t - b_t.
Days are grouped into calendar weeks; each bootstrap draw resamples as many weeks as there are, with
replacement, and takes the mean of d over the drawn days. Whole weeks travel together, so serial
dependence inside a week is kept. The CI is the percentile interval of the draws; the two-sided
p-value is the share of centred draws at least as far from zero as the observed mean; the draws' std is
the difference's standard error, and `minimum_detectable_effect` turns it into what the test could find.

The bootstrap sees the days of one (seed-mean) series, not the seeds or the clients: one seed's offset, or
one client's, shifts every week alike and can pass as significant. `paired_t_test` asks the units' own
question — do the per-seed (or per-client) mean differences stay away from zero — with a paired t-test
over the seeds (clients) both methods ran. `paired_cluster_bootstrap` resamples clients and weeks at once
(the two-way "pigeonhole" bootstrap: every drawn client on every drawn week), so a difference must hold
across both the data owners and the calendar to pass. `paired_pooled_bootstrap` does the same for a
correlation of the whole universe (one cross-section a day, which no mean over clients gives): it recomputes
each day's correlation on the drawn clients' names from their summed moments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import pandas as pd

from fedloom.metrics.cross_section import pooled_correlation


def week_blocks(dates: pd.DatetimeIndex) -> np.ndarray:
    """Block id per day: its Monday-starting calendar week."""
    return dates.to_period("W-SUN").asi8


def _week_ids(dates: pd.DatetimeIndex) -> np.ndarray:
    """Each day's calendar week as 0, 1, … in date order (`week_blocks` numbered): the bootstraps' block index."""
    return np.unique(week_blocks(dates), return_inverse=True)[1]


def _multiplicities(rng: np.random.Generator, units: int, size: int) -> np.ndarray:
    """``size`` draws of ``units`` units with replacement, as how often each unit is drawn [size, units]."""
    return rng.multinomial(units, np.full(units, 1 / units), size=size).astype(float)


def _check_two_way(n_clients: int, n_weeks: int) -> None:
    if n_clients < 2 or n_weeks < 2:
        raise ValueError(f"need at least 2 clients and 2 weeks, got {n_clients} and {n_weeks}")


def paired_block_bootstrap(
    a: pd.Series, b: pd.Series, n_boot: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """Mean of a - b over the days both have, its bootstrap CI and p-value, and the sample sizes."""
    d = (a - b).dropna().sort_index()
    if len(d) < 2:
        raise ValueError(f"need at least 2 paired days, got {len(d)}")
    inverse = _week_ids(pd.DatetimeIndex(d.index))
    sums = np.bincount(inverse, weights=d.to_numpy())
    counts = np.bincount(inverse).astype(float)
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    means = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
    return draws_summary(float(d.mean()), means, confidence) | {"days": float(len(d)), "weeks": float(len(sums))}


def draws_summary(observed: float, means: np.ndarray, confidence: float) -> dict[str, float]:
    """The observed mean difference and, from the bootstrap's draws of it: the percentile CI, the two-sided
    p (the share of centred draws at least as far from zero as the observation, +1 smoothed), the standard
    error and the minimum detectable effect."""
    tail = (1 - confidence) / 2
    far = np.abs(means - observed) >= abs(observed)
    std_error = float(means.std(ddof=1))
    return {
        "mean_difference": observed,
        "ci_low": float(np.quantile(means, tail)),
        "ci_high": float(np.quantile(means, 1 - tail)),
        "p_value": float((far.sum() + 1) / (len(means) + 1)),
        "std_error": std_error,
        "mde": minimum_detectable_effect(std_error, 1 - confidence),
    }


def paired_cluster_bootstrap(
    difference: pd.Series, weight: pd.Series, n_boot: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """Two-way bootstrap of a weighted mean difference over cells indexed by (date, client).

    ``difference`` holds a − b per client and day, ``weight`` each cell's share of its day (shares summing
    to 1 a day make the observed value the mean over days of the daily difference, as in
    `paired_block_bootstrap`). A draw takes as many clients and as many calendar weeks as there are, each
    with replacement, and the weighted mean of the cells where a drawn client meets a drawn week, counted
    with both multiplicities: with S[c, w] = Σ weight·difference and N[c, w] = Σ weight over client c's days
    of week w, a draw is uᵀSv / uᵀNv for the multiplicity vectors u (clients) and v (weeks). CI, p and
    minimum detectable effect as in `paired_block_bootstrap`; ``clients`` and ``weeks`` count the units."""
    cells = pd.DataFrame({"d": difference, "w": weight}).dropna()
    cells = cells[cells["w"] > 0]
    dates = pd.DatetimeIndex(cells.index.get_level_values(0))
    _, client = np.unique(cells.index.get_level_values(1).astype(str), return_inverse=True)
    week = _week_ids(dates)
    n_clients, n_weeks = int(client.max(initial=-1)) + 1, int(week.max(initial=-1)) + 1
    _check_two_way(n_clients, n_weeks)
    w, d = cells["w"].to_numpy(float), cells["d"].to_numpy(float)
    sums, totals = np.zeros((n_clients, n_weeks)), np.zeros((n_clients, n_weeks))
    np.add.at(sums, (client, week), w * d)
    np.add.at(totals, (client, week), w)
    rng = np.random.default_rng(seed)
    u, v = _multiplicities(rng, n_clients, n_boot), _multiplicities(rng, n_weeks, n_boot)
    num, den = ((u @ sums) * v).sum(axis=1), ((u @ totals) * v).sum(axis=1)
    means = num[den > 0] / den[den > 0]  # a draw whose clients hold no day in its weeks has no mean
    units = {"days": float(dates.nunique()), "weeks": float(n_weeks), "clients": float(n_clients)}
    return draws_summary(float(sums.sum() / totals.sum()), means, confidence) | units


def paired_pooled_bootstrap(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    dates: pd.DatetimeIndex,
    n_boot: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    chunk: int = 500,
) -> dict[str, float]:
    """Two-way bootstrap of the difference in a universe-wide daily correlation (``ic_pooled``, ``rank_ic_pooled``).

    ``a[s]`` and ``b[s]`` hold seed s's `metrics.cross_section.MOMENTS` per client and day (shape clients × days
    × 6 on one client order and on ``dates``; zeros where a client has no rows). The observed value is the mean
    over days of the difference of the seed-mean daily correlations (`paired_block_bootstrap`'s on the same
    series). A draw takes clients and calendar weeks with replacement: each day's correlation is recomputed on
    the drawn clients' names, counted with their multiplicities (`pooled_correlation` of uᵀ·moments), and the
    days are weighted by their week's multiplicity. A difference must then hold across the owners whose names
    make the cross-section, not only across the calendar. CI, p and minimum detectable effect as in
    `paired_block_bootstrap`."""
    if not a or len(a) != len(b):
        raise ValueError(f"need the same seeds on both sides, got {len(a)} and {len(b)}")
    n_clients = a[0].shape[0]
    week = _week_ids(pd.DatetimeIndex(dates))
    n_weeks = int(week.max(initial=-1)) + 1
    _check_two_way(n_clients, n_weeks)

    def difference(u: np.ndarray) -> np.ndarray:  # draws × days: seed-mean correlation of a minus b's
        sides = []
        for side in (a, b):
            r = np.stack([pooled_correlation(np.einsum("bc,ctk->btk", u, m)) for m in side])
            count = np.isfinite(r).sum(axis=0)
            with np.errstate(invalid="ignore"):
                sides.append(np.where(count > 0, np.nansum(r, axis=0) / np.maximum(count, 1), np.nan))
        return sides[0] - sides[1]

    d = difference(np.ones((1, n_clients)))[0]
    if np.isfinite(d).sum() < 2:
        raise ValueError(f"need at least 2 days with both correlations, got {int(np.isfinite(d).sum())}")
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        u, v = _multiplicities(rng, n_clients, size), _multiplicities(rng, n_weeks, size)[:, week]
        drawn = difference(u)
        w = np.where(np.isfinite(drawn), v, 0.0)
        total = w.sum(axis=1)
        means.append((np.nansum(drawn * w, axis=1) / np.where(total > 0, total, 1.0))[total > 0])
    units = {"days": float(np.isfinite(d).sum()), "weeks": float(np.unique(week[np.isfinite(d)]).size),
             "clients": float(n_clients)}  # fmt: skip
    return draws_summary(float(np.nanmean(d)), np.concatenate(means), confidence) | units


def minimum_detectable_effect(std_error: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference a two-sided test at level ``alpha`` finds with probability
    ``power``, given the standard error of the estimate (normal approximation):
    (z_{1−α/2} + z_{power}) · SE — 2.80 · SE at 5 % and 80 %. What a table could have detected at all."""
    z = NormalDist().inv_cdf
    return float((z(1 - alpha / 2) + z(power)) * std_error)


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Paired t-test over units — seeds, or clients — of their means ``a[i]`` vs ``b[i]`` (the same unit
    i): mean difference, two-sided p and the number of pairs ``n`` (p is NaN with fewer than two units, or
    when every unit differs by the same nonzero amount to 1e-9 of it: no spread to test against; 1 when
    every unit gives the same value)."""
    from scipy.stats import ttest_rel  # scipy.stats (~0.3 s): only comparisons load it

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"per-unit values must pair up: {len(x)} vs {len(y)}")
    d = x - y
    mean = float(d.mean()) if len(d) else math.nan
    if len(d) < 2:
        p = math.nan
    elif np.ptp(d) <= 1e-9 * np.abs(d).max():  # the same difference on every seed, up to float round-off
        p = 1.0 if not d.any() else math.nan
    else:
        p = float(ttest_rel(x, y).pvalue)
    return {"mean_difference": mean, "p_value": p, "n": float(len(d))}
