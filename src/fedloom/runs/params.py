"""Trainable parameters per method and adapter rank, and the rank that matches a parameter budget.

Seed 000's fairness rule (Table 2): adapter ranks are tuned so that every method trains within 10 % of
RPA's parameters, unless a method's structure fixes them. A method's count is what one client's
optimizers and closed-form head update in a round — summary.json's ``trainable_params``, counted from the
tensors `Learner.fit` actually steps, so FFA-LoRA's frozen A or RPA's server-side prototypes are not
counted — measured here by running a few rounds of one step on a cut of the data (`PROBE`): the count
depends on the backbone, the adapter layout and the task head, not on how much data there is. The rank
lives in the frozen model's adapter layout, so each rank gets its own workspace (the frozen features are
cached and shared).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fedloom.errors import ConfigError
from fedloom.progress import Progress, SilentProgress
from fedloom.runs.config import RunConfig, load_config
from fedloom.runs.workspace import Workspace, prepare_workspace

# one local step a round on one date per split: enough to see which tensors a client trains
PROBE = ("train.steps=1", "data.max_dates_per_split=1", "data.max_val_dates=1", "data.max_test_dates=1")
PROBE_ROUNDS = 2  # FedDPA trains its local adapter from round 2 (FedLEASE after its warm-up: raise it, or
# shorten methods.fedlease.warmup_rounds, which does not change what a client trains afterwards)
WITHIN = 0.10  # seed 000 Table 2: "within 10 % of our method"


@dataclass(frozen=True)
class RankMatch:
    """One method's counts by rank and the rank nearest the budget."""

    method: str
    counts: dict[int, float]  # rank → mean trainable parameters per client
    rank: int
    budget: float

    @property
    def ratio(self) -> float:
        return self.counts[self.rank] / self.budget

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1.0) <= WITHIN


def probe_config(path: Path | None, overrides: Sequence[str] = (), rounds: int = PROBE_ROUNDS) -> RunConfig:
    """The config at ``path`` with ``overrides``, cut to `PROBE`'s ``rounds`` rounds of one step on one date
    per split (method, backbone, adapter and task unchanged); a client's count is its most in any round."""
    return load_config(path, None, [*overrides, *PROBE, f"rounds={rounds}"])


def variant(cfg: RunConfig, method: str, rank: int) -> RunConfig:
    """``cfg`` with another method and adapter rank, validated like any config."""
    raw = cfg.model_dump(mode="json")
    return RunConfig.model_validate({**raw, "method": method, "adapter": {**raw["adapter"], "rank": rank}})


def trainable_count(cfg: RunConfig, ws: Workspace) -> float:
    """Mean over clients of the parameters a client of ``cfg.method`` trains in a round (its most in any
    round of a run of ``cfg`` on ``ws``: `probe_config`'s; the run directory is thrown away)."""
    from fedloom.runs.llm import run_method  # the model stack: loaded only when something is counted

    with tempfile.TemporaryDirectory(prefix="fedloom-params-") as out:
        summary = run_method(cfg, ws, Path(out) / "run")
    counted = summary.get("trainable_params")
    if not counted:
        raise ConfigError(f"method {cfg.method!r} trains nothing on the clients: there is no count to match")
    return float(counted["mean"])


def nearest_rank(counts: Mapping[int, float], budget: float) -> int:
    """The rank whose count is nearest ``budget`` (relative distance; a tie goes to the smaller rank).

    >>> nearest_rank({4: 900.0, 8: 1800.0, 16: 3600.0}, 2000.0)
    8
    """
    if not counts:
        raise ConfigError("no ranks to choose from")
    return min(sorted(counts), key=lambda r: abs(counts[r] / budget - 1.0))


def match_ranks(
    cfg: RunConfig,
    methods: Sequence[str],
    reference: str,
    ranks: Sequence[int],
    progress: Progress | None = None,
) -> tuple[float, list[RankMatch]]:
    """The reference method's count at ``cfg``'s rank (the budget) and, per other method, its counts at
    ``ranks`` and the rank nearest the budget. ``cfg`` is `probe_config`'s."""
    progress = progress or SilentProgress()
    workspaces: dict[int, Workspace] = {}

    def count(method: str, rank: int) -> float:
        if rank not in workspaces:
            workspaces[rank] = prepare_workspace(variant(cfg, cfg.method, rank), progress)
        done = progress.task(f"counting {method} at rank {rank}", 1)
        n = trainable_count(variant(cfg, method, rank), workspaces[rank])
        done(1)
        return n

    budget = count(reference, cfg.adapter.rank)
    matches = []
    for method in methods:
        if method != reference:
            counts = {r: count(method, r) for r in sorted(set(ranks))}
            matches.append(RankMatch(method, counts, nearest_rank(counts, budget), budget))
    return budget, matches
