"""Daily series of a financial run, the input of significance tests and the regime breakdown.

From every client's personalized model on its test rows — the models of the round chosen on validation
(daily.csv) and of the final round (daily_final.csv), `fedloom.runs.llm` — per date, the macro mean over
clients of the within-client IC and RankIC (regression, ranking; regression also the pooled MSE
and MAE) or the pooled accuracy (classification). Seed 000 compares methods on such series with a
paired block bootstrap over trading weeks (Table 5) and breaks them down by market regime (§4.4).
Each client's own daily values of the columns that are means over clients or over rows (clients.csv,
`client_daily_metrics`) let a comparison resample the data owners as well as the weeks.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from fedloom.algorithms.base import Algorithm, Record
from fedloom.metrics.cross_section import POOLED, client_moments, daily_ic, daily_rank_ic
from fedloom.metrics.regimes import fit_regime_thresholds, label_regimes, per_regime_mean, regime_stability
from fedloom.runtime.memory import algorithm_state
from fedloom.tasks.learner import Learner


def test_predictions(
    algorithm: Algorithm,
    server: Record,
    clients: Mapping[str, Record],
    learners: Mapping[str, Learner],
    frame: pd.DataFrame,
    round: int,
) -> pd.DataFrame:
    """Long ``client, row, date, instrument, score, target`` of every client's model on its test rows."""
    downloads = algorithm.configure(server, list(learners), round)
    parts = []
    for cid, learner in learners.items():
        rows = learner.data.test
        if len(rows) == 0:
            continue
        model = algorithm.client_model(downloads[cid], algorithm_state(clients[cid]))
        parts.append(
            pd.DataFrame(
                {
                    "client": cid,
                    "row": rows,
                    "date": frame["date"].to_numpy()[rows],
                    "instrument": frame["instrument"].to_numpy()[rows],
                    "score": learner.predict(model.params, "test", model.mixture),
                    "target": learner.eval_targets[rows].numpy(),
                }
            )
        )
    if not parts:  # no client has test rows (e.g. a split that ends before the test period)
        return pd.DataFrame(columns=["client", "row", "date", "instrument", "score", "target"])
    return pd.concat(parts, ignore_index=True)


def daily_metrics(predictions: pd.DataFrame, task_kind: str, clients: pd.DataFrame | None = None) -> pd.DataFrame:
    """Date-indexed daily series: ``ic`` and ``rank_ic`` (macro over clients of the within-client
    correlation: the mean of each date's client values in ``clients``, `client_daily_metrics`' frame of the
    same predictions, computed here when not given), ``ic_pooled`` and ``rank_ic_pooled`` (one cross-section
    of every client's rows, Qlib's number for a universe; regression adds pooled ``mse`` and ``mae``) or
    ``accuracy`` (pooled)."""
    if task_kind == "classification":
        hit = (predictions["score"] == predictions["target"]).astype(float)
        return hit.groupby(pd.to_datetime(predictions["date"])).mean().to_frame("accuracy").sort_index()
    clients = client_daily_metrics(predictions, task_kind) if clients is None else clients
    by_date = clients.groupby(level=0)
    out = {name: by_date[name].mean().dropna() for name in ("ic", "rank_ic") if name in clients}
    score, target = predictions["score"].to_numpy(), predictions["target"].to_numpy()
    dates = pd.to_datetime(predictions["date"]).to_numpy()
    out |= {f"ic{POOLED}": daily_ic(score, target, dates), f"rank_ic{POOLED}": daily_rank_ic(score, target, dates)}
    if task_kind == "regression":  # predictions are returns: pooled squared and absolute error per date
        error = predictions["score"] - predictions["target"]
        out |= {"mse": (error**2).groupby(dates).mean(), "mae": error.abs().groupby(dates).mean()}
    frame = pd.DataFrame(out)
    frame.index = pd.to_datetime(frame.index)
    return frame.sort_index()


def client_daily_metrics(predictions: pd.DataFrame, task_kind: str) -> pd.DataFrame:
    """Date-indexed, one line per client and date: ``client``, ``rows`` (its test rows that day) and its own
    value of every `metrics.cross_section.CLIENT_WEIGHTS` column `daily_metrics` writes for ``task_kind``; weighted as
    `CLIENT_WEIGHTS` says, they average back to daily.csv's columns. Regression and ranking add the client's
    `MOMENTS` of the day's universe-wide correlations (`client_moments`): summed over the clients they give
    daily.csv's ``ic_pooled`` and ``rank_ic_pooled``."""
    parts = []
    for cid, g in predictions.groupby("client", sort=True):
        dates = pd.to_datetime(g["date"]).to_numpy()
        score, target = g["score"].to_numpy(), g["target"].to_numpy()
        columns: dict[str, pd.Series] = {"rows": pd.Series(1.0, index=dates).groupby(level=0).sum()}
        if task_kind == "classification":
            columns["accuracy"] = pd.Series((score == target).astype(float), index=dates).groupby(level=0).mean()
        else:
            columns |= {"ic": daily_ic(score, target, dates), "rank_ic": daily_rank_ic(score, target, dates)}
        if task_kind == "regression":
            error = pd.Series(score - target, index=dates, dtype=float)
            columns |= {"mse": (error**2).groupby(level=0).mean(), "mae": error.abs().groupby(level=0).mean()}
        frame = pd.DataFrame(columns)
        parts.append(frame.assign(client=str(cid))[["client", *columns]])
    if not parts:
        return pd.DataFrame(columns=["client", "rows"])
    out = pd.concat(parts)
    out.index = pd.to_datetime(out.index)
    out.index.name = "date"
    if task_kind != "classification":  # each client's share of the universe-wide correlations of the day
        dates = pd.to_datetime(predictions["date"]).to_numpy()
        moments = client_moments(predictions["score"], predictions["target"], dates, predictions["client"])
        out = out.set_index("client", append=True).join(moments).reset_index("client")
    return out.sort_index(kind="stable")


def regime_breakdown(daily: pd.Series, index_close: pd.Series, train_dates: np.ndarray) -> dict[str, float]:
    """Per-regime mean of a daily metric, its cross-regime std and worst-regime drop; the regime
    thresholds are fitted on the training period only."""
    start, end = pd.Timestamp(train_dates.min()), pd.Timestamp(train_dates.max())
    regimes = label_regimes(index_close, fit_regime_thresholds(index_close, start, end))
    per = per_regime_mean(daily, regimes)
    return {**{f"regime/{k}": float(v) for k, v in per.items()}, **regime_stability(per)}
