"""The trivial predictor beside every financial run: each client's training mean (or majority class),
scored on the same rows, and its training loss (½ on standardized targets)."""

from __future__ import annotations

import numpy as np
import pytest

from fedloom.runs.baseline import constant_baseline, learner_owners
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config


def test_the_constant_is_each_clients_training_mean_and_its_train_loss_is_one_half():
    ws = prepare_workspace(small_config())
    got = constant_baseline(learner_owners(ws.learners))
    assert got["train_loss"] == pytest.approx(0.5)
    mse = []
    for learner in ws.learners.values():
        y = learner.targets.numpy()
        mean = y[learner.data.train].mean()
        mse.append(np.mean((y[learner.data.test] - mean) ** 2))
    assert got["test/mse/macro"] == pytest.approx(np.mean(mse), rel=1e-5)
    assert np.isnan(got["test/ic/macro"])  # a constant ranks nothing: its IC is undefined


def test_a_run_reports_the_constant_beside_its_train_loss_and_the_table_shows_both(tmp_path):
    from fedloom.results.load import find_runs
    from fedloom.results.table import build_tables
    from fedloom.runs import run

    summary = run(small_config(), tmp_path / "run")
    assert summary["baseline"]["train_loss"] == pytest.approx(0.5)
    (table,) = build_tables(find_runs([tmp_path]))
    labels = [c.label for c in table.columns]
    assert {"train loss", "train loss const", "MSE const"} <= set(labels)
    assert table.rows[0].cells["train loss const"].mean == pytest.approx(0.5)


def test_a_one_pass_reference_reports_the_same_constant_as_an_llm_run_on_its_rows(tmp_path):
    from fedloom.runs import run

    cfg = small_config(method="ridge-probe", **{"references.ridge_probe.inputs": "covariates"})
    reference = run(cfg, tmp_path / "probe")["baseline"]
    llm = constant_baseline(learner_owners(prepare_workspace(small_config()).learners))
    assert reference["train_loss"] == pytest.approx(0.5)
    assert set(reference) == set(llm)
    for key, value in llm.items():
        assert reference[key] == pytest.approx(value, rel=1e-6, nan_ok=True), key
