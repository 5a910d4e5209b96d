"""The frozen-feature probe (issue 42): ridge on covariates / the frozen LLM's pooled state / both, pooled,
local and federated in one round from the clients' summed moments — federated equals pooled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.runs import run
from fedloom.runs.kinds import kind_of
from fedloom.runs.reference import frozen_state, reference_table
from fedloom.runs.workspace import prepare_workspace
from fedloom.tasks.learner import FROZEN
from tests.conftest import small_config

PROBE = {"method": "ridge-probe", "data.synthetic.days": 40}


def probe(tmp_path, name: str, **sets: object) -> tuple[dict, pd.DataFrame]:
    """The probe's summary and daily series (the per-day IC of its test scores)."""
    summary = run(small_config(**PROBE, **sets), tmp_path / name)
    return summary, pd.read_csv(tmp_path / name / "daily.csv")


def test_the_probe_is_a_one_pass_reference_even_federated():
    assert kind_of(small_config(**PROBE, **{"references.mode": "federated"})).name == "reference"
    assert kind_of(small_config(method="mlp", **{"references.mode": "federated"})).name == "federated-reference"


def test_the_federated_probe_equals_the_pooled_one_and_local_differs(tmp_path):
    pooled, p = probe(tmp_path, "pooled", **{"references.mode": "pooled"})
    federated, f = probe(tmp_path, "federated", **{"references.mode": "federated"})
    local, loc = probe(tmp_path, "local", **{"references.mode": "local"})
    for key, value in pooled["metrics"].items():
        assert federated["metrics"][key] == pytest.approx(value, rel=1e-5, abs=1e-9), key
    np.testing.assert_allclose(f["ic"].to_numpy(), p["ic"].to_numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(loc["ic"].to_numpy(), p["ic"].to_numpy())
    fit = federated["reference"]["fits"]["federated"]
    assert fit["alpha"] == pooled["reference"]["fits"]["pooled"]["alpha"] and fit["clients"] == 3
    assert fit["uploaded_numbers"] > 0
    assert set(local["reference"]["fits"]) == set(local["per_client"])


def test_the_state_inputs_are_the_frozen_models_pooled_state(tmp_path):
    cfg = small_config(**PROBE, **{"references.ridge_probe.inputs": "state"})
    table = reference_table(cfg)
    state = frozen_state(cfg, table)
    assert state.shape == (len(table), 64) and np.isfinite(state).all()
    for learner in prepare_workspace(cfg).learners.values():  # the head's frozen input, row for row
        rows = learner.data.split("test")[:5]
        np.testing.assert_allclose(state[rows], learner.pooled({}, rows, mixture=FROZEN).numpy(), atol=1e-5)
    summary, _ = probe(tmp_path, "state", **{"references.ridge_probe.inputs": "state"})
    both, _ = probe(tmp_path, "both", **{"references.ridge_probe.inputs": "both"})
    covariates, _ = probe(tmp_path, "cov", **{"references.ridge_probe.inputs": "covariates"})
    for s in (summary, both, covariates):
        assert np.isfinite(s["metrics"]["personal/test/mse/macro"])
    assert summary["metrics"] != covariates["metrics"]
