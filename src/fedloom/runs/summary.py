"""summary.json of a run: test metrics at the round chosen on validation and after the last round,
per-client metrics, communication totals, failures and wall time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fedloom.metrics.federated import higher_is_better
from fedloom.runs.config import RunConfig
from fedloom.runs.kinds import kind_of
from fedloom.runtime.rounds import RoundRecord, SimulationResult, mean_train_loss


def best_round(history: list[RoundRecord], metric: str) -> RoundRecord:
    """The evaluated round with the best macro validation ``metric`` (personalized); ties → earliest."""
    key = f"personal/val/{metric}/macro"
    sign = 1.0 if higher_is_better(metric) else -1.0
    evaluated = [r for r in history if r.evaluation is not None]
    scored = [(sign * r.summary[key], -r.round, r) for r in evaluated if math.isfinite(r.summary.get(key, math.nan))]
    return max(scored, key=lambda t: t[:2])[2] if scored else evaluated[-1]


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
    best, last = best_round(result.history, metric), result.history[-1]
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
        "selection": {"metric": f"personal/val/{metric}/macro", "best_round": best.round},
        "metrics": {**best.summary, **({"train_loss/final_round": mean_train_loss(last)} if kind.rounds else {})},
        "final_metrics": last.summary,
        "per_client": per_client,
        "communication": {
            "download_bytes": sum(sum(r.download_bytes.values()) for r in result.history),
            "upload_bytes": sum(sum(r.upload_bytes.values()) for r in result.history),
            "by_group": by_group,
        },
        "failures": sum(len(r.failures) for r in result.history),
        "rejected": sum(len(r.rejected) for r in result.history),
        "wall_seconds": wall,
        "run_dir": run_dir,
    }
