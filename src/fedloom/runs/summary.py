"""summary.json of a run: test metrics at the round chosen on validation and after the last round,
per-client metrics, communication totals, failures and wall time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedloom.errors import ConfigError
from fedloom.metrics.federated import higher_is_better
from fedloom.runs.config import RunConfig
from fedloom.runs.kinds import kind_of
from fedloom.runtime.rounds import TRAINABLE_PARAMS, RoundRecord, SimulationResult, mean_train_loss


def selection_metric(cfg: RunConfig, primary: str) -> str:
    """The validation metric that chooses the reported round: ``federation.select_metric``, else the task's
    ``primary`` (issue 43: FNSPID's MSE table need not be chosen by IC)."""
    return cfg.federation.select_metric or primary


def validation_scores(history: list[RoundRecord], metric: str) -> list[tuple[RoundRecord, float]]:
    """(round, its finite macro validation ``metric`` of the personalized models), in round order."""
    key = f"personal/val/{metric}/macro"
    return [(r, r.summary[key]) for r in history if math.isfinite(r.summary.get(key, math.nan))]


def best_round(history: list[RoundRecord], metric: str) -> RoundRecord:
    """The evaluated round with the best macro validation ``metric`` (personalized); ties → earliest. A metric
    no evaluated round reports is a ConfigError (a typo in ``federation.select_metric``), a NaN one falls
    back to the last evaluated round."""
    key = f"personal/val/{metric}/macro"
    sign = 1.0 if higher_is_better(metric) else -1.0
    evaluated = [r for r in history if r.evaluation is not None]
    if evaluated and not any(key in r.summary for r in evaluated):
        known = sorted({k.split("/")[2] for r in evaluated for k in r.summary if k.startswith("personal/val/")})
        raise ConfigError(f"no round reports validation metric {metric!r} to choose the round by; "
                          f"this run's: {', '.join(known)}")  # fmt: skip
    scored = [(sign * v, -r.round, r) for r, v in validation_scores(evaluated, metric)]
    return max(scored, key=lambda t: t[:2])[2] if scored else evaluated[-1]


LAST_ROUNDS = 20  # seed 000 eq. 25: route statistics averaged over the last 20 rounds


def rounds_to_share(history: list[RoundRecord], metric: str, share: float = 0.95) -> float:
    """The first evaluated round whose macro validation ``metric`` is within ``share`` of the run's best
    (seed 000 Table 11's "rounds to 95 %"): ≥ share·best where higher is better, ≤ best/share where lower
    is; NaN where the best is not positive (a share of a negative IC means nothing).

    >>> rounds_to_share([RoundRecord(r, [], summary={"personal/val/ic/macro": v}) for r, v in
    ...                  [(1, 0.01), (2, 0.096), (3, 0.1)]], "ic")
    2.0
    """
    scored = validation_scores(history, metric)
    if not scored:
        return math.nan
    up = higher_is_better(metric)
    best = max(v for _, v in scored) if up else min(v for _, v in scored)
    if best <= 0:
        return math.nan
    return float(next(r.round for r, v in scored if (v >= share * best if up else v <= best / share)))


def recent_diagnostics(history: list[RoundRecord], window: int = LAST_ROUNDS) -> dict[str, float]:
    """Each numeric per-round diagnostic (RPA's route entropy, collapse rate, load imbalance …) averaged
    over the last ``window`` rounds that report it (seed 000 eq. 25; the last round alone is noisy)."""
    values: dict[str, list[float]] = {}
    for r in history:
        for k, v in r.diagnostics.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                values.setdefault(k, []).append(float(v))
    return {k: float(np.mean(v[-window:])) for k, v in sorted(values.items())}


def trainable_params(history: list[RoundRecord]) -> dict[str, Any]:
    """Elements of the tensors each client trained (its optimizers' and closed-form heads'), the most of any
    round, and their mean and max over clients (seed 000 Table 2's fairness rule and Fig. 7's bubble): empty
    for a run whose clients train nothing through `Learner.fit`."""
    per: dict[str, float] = {}
    for r in history:
        for cid, m in r.train.items():
            if TRAINABLE_PARAMS in m:
                per[cid] = max(per.get(cid, 0.0), float(m[TRAINABLE_PARAMS]))
    if not per:
        return {}
    values = list(per.values())
    return {"mean": float(np.mean(values)), "max": max(values), "per_client": dict(sorted(per.items()))}


def build_summary(
    cfg: RunConfig,
    result: SimulationResult,
    wall: float,
    run_dir: str,
    metric: str,
    synthetic: bool,
    per_client_extra: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """Test metrics at the round chosen on validation (``metrics``) and after the last round; what the
    run's kind says of its model (`RunKind.summary_fields`). A reference fitted in one pass has one round,
    its fit, and no train loss."""
    kind = kind_of(cfg)
    select = selection_metric(cfg, metric)
    best, last = best_round(result.history, select), result.history[-1]
    assert best.evaluation is not None
    clients = sorted({c for per_split in best.evaluation.values() for per in per_split.values() for c in per})
    per_client: dict[str, dict[str, float]] = {cid: {} for cid in clients}
    for mode, per_split in best.evaluation.items():
        prefix = "" if mode == "personal" else f"{mode}/"
        for split, per in per_split.items():
            for cid, values in per.items():
                per_client[cid].update({f"{prefix}{split}/{m}": v for m, v in values.items()})
    by_group: dict[str, dict[str, int]] = {}
    for r in result.history:
        for direction, groups in r.bytes_by_group.items():
            for g, n in groups.items():
                by_group.setdefault(direction, {}).setdefault(g, 0)
                by_group[direction][g] += n
    trained, recent = trainable_params(result.history), recent_diagnostics(result.history)
    for cid, extra in per_client_extra.items():
        per_client.setdefault(cid, {}).update(extra)
    return {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "primary_metric": metric,
        "synthetic": synthetic,
        **kind.summary_fields(cfg),
        "rounds": cfg.rounds if kind.rounds else 1,
        "seed": cfg.seed,
        "selection": {
            "metric": f"personal/val/{select}/macro",
            "best_round": best.round,
            "rounds_to_95": rounds_to_share(result.history, select),
        },
        "metrics": {**best.summary, **({"train_loss/final_round": mean_train_loss(last)} if kind.rounds else {})},
        **({"train_loss_measure": cfg.train.train_loss} if kind.rounds else {}),
        "final_metrics": last.summary,
        "per_client": per_client,
        "communication": {
            "download_bytes": sum(sum(r.download_bytes.values()) for r in result.history),
            "upload_bytes": sum(sum(r.upload_bytes.values()) for r in result.history),
            "by_group": by_group,
        },
        **({"trainable_params": trained} if trained else {}),
        **({"last_rounds": {"window": LAST_ROUNDS, "diagnostics": recent}} if recent else {}),
        "failures": sum(len(r.failures) for r in result.history),
        "rejected": sum(len(r.rejected) for r in result.history),
        "wall_seconds": wall,
        "run_dir": run_dir,
    }
