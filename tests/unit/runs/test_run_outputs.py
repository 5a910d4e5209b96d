"""One model behind every number: daily.csv comes from the round chosen on validation (its checkpoint
is kept), daily_final.csv from the final models."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config


def test_daily_outputs_come_from_the_chosen_round_and_the_final_models_are_a_second_view(tmp_path: Path):
    cfg = small_config(rounds=4, seed=0, method="fedavg", **{"train.lr": 0.05})  # a noisy run: best round 3 of 4
    summary = run_method(cfg, prepare_workspace(cfg), tmp_path)
    chosen = summary["selection"]["best_round"]
    assert chosen == 3 and summary["outputs_round"] == chosen
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("round-*")) == ["round-00003", "round-00004"]

    # daily IC: per date, the mean over clients of the within-client IC; every client has every test
    # date here, so its mean over dates is the macro mean over clients of each client's mean daily IC
    daily = pd.read_csv(tmp_path / "daily.csv")
    final = pd.read_csv(tmp_path / "daily_final.csv")
    key = "personal/test/ic/macro"
    assert daily["ic"].mean() == pytest.approx(summary["metrics"][key], abs=1e-6)
    assert final["ic"].mean() == pytest.approx(summary["final_metrics"][key], abs=1e-6)
    assert abs(summary["metrics"][key] - summary["final_metrics"][key]) > 0.1  # the two views differ
