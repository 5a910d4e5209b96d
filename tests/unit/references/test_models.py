"""Each structured reference learns a planted signal, stops early on its validation fold, and the
pooled / local modes differ as they should. Data here is SYNTHETIC (random features, planted targets)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr

from fedloom.data.schema import ClientData
from fedloom.references.base import Fold, Objective
from fedloom.references.config import LinearConfig, ReferenceOptions
from fedloom.references.linear import LinearReference
from fedloom.references.registry import REFERENCES, SEQUENCE_REFERENCES
from fedloom.references.training import fit_and_score

# small enough to run in seconds: boosting capped at 200 rounds, the MLP at 600 steps of 256 rows
FAST = ReferenceOptions.model_validate(
    {
        "threads": 1,
        "lightgbm": {
            "num_boost_round": 200,
            "num_leaves": 15,
            "lambda_l1": 0.0,
            "lambda_l2": 1.0,
            "learning_rate": 0.1,
        },
        "xgboost": {"num_boost_round": 200, "eta": 0.1, "max_depth": 4},
        "catboost": {"num_boost_round": 200, "learning_rate": 0.1, "num_leaves": 15},
        "mlp": {"max_steps": 600, "batch_rows": 256, "eval_steps": 20},
        **{
            name: {"hidden_size": 16, "batch_rows": 128, "max_epochs": 25, "early_stop": 5, "learning_rate": 0.01}
            for name in SEQUENCE_REFERENCES
            if name not in ("gat", "dtml")
        },
        "gat": {"hidden_size": 16, "max_epochs": 8, "early_stop": 3, "learning_rate": 0.02, "dropout_rate": 0.0},
        "dtml": {"hidden_size": 16, "max_epochs": 8, "early_stop": 3, "learning_rate": 0.02, "dropout_rate": 0.0},
        "transformer": {"hidden_size": 16, "batch_rows": 128, "max_epochs": 10, "early_stop": 3,
                        "learning_rate": 0.01},
        "tcn": {"hidden_size": 16, "num_layers": 2, "dropout_rate": 0.1, "batch_rows": 128, "max_epochs": 25,
                "early_stop": 5, "learning_rate": 0.01},
    }
)  # fmt: skip


def lagged(d: int) -> list[str]:
    """Alpha360-style names for d columns: two fields at lags d/2-1 … 0, or one field at lags d-1 … 0."""
    fields, steps = ("A", "B") if d % 2 == 0 else ("A",), d // 2 if d % 2 == 0 else d
    return [f"{f}{lag}" for f in fields for lag in range(steps - 1, -1, -1)]


# every reference that reads plain or lagged columns (MASTER and HIST: test_master.py, test_hist.py)
ROWS_OR_SERIES = sorted(name for name, r in REFERENCES.items() if r.reads in ("rows", "series"))
DAYS = np.arange(3000) // 25  # SYNTHETIC dates: 25 stocks a day, for the references that batch by day


def planted(n: int, d: int, seed: int, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """SYNTHETIC: y = x·w + noise with a fixed random w."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    w = np.random.default_rng(99).standard_normal(d).astype(np.float32)
    return x, (x @ w + noise * rng.standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("name", ROWS_OR_SERIES)
def test_reference_learns_a_planted_signal(name: str) -> None:
    x, y = planted(3000, 6, seed=1)
    model = REFERENCES[name].build(FAST, Objective("regression"), lagged(x.shape[1]), 0)
    model.fit(Fold(x[:2000], y[:2000], DAYS[:2000]), Fold(x[2000:2500], y[2000:2500], DAYS[2000:2500]))
    score = model.predict(x[2500:], DAYS[2500:])
    assert score.shape == (500,)
    assert pearsonr(score, y[2500:]).statistic > 0.8


@pytest.mark.parametrize("name", ROWS_OR_SERIES)
def test_reference_classifies(name: str) -> None:
    x, y = planted(3000, 6, seed=2)
    labels = (y > 0).astype(np.float32)
    model = REFERENCES[name].build(FAST, Objective("classification", 2), lagged(x.shape[1]), 0)
    model.fit(Fold(x[:2000], labels[:2000], DAYS[:2000]), Fold(x[2000:2500], labels[2000:2500], DAYS[2000:2500]))
    predicted = model.predict(x[2500:], DAYS[2500:])
    assert set(np.unique(predicted)) <= {0.0, 1.0}
    assert float(np.mean(predicted == labels[2500:])) > 0.8


@pytest.mark.parametrize("name", ["lightgbm", "xgboost", "catboost"])
def test_boosting_stops_early_when_validation_is_noise(name: str) -> None:
    """Validation targets unrelated to the features: the best round comes long before the cap."""
    x, y = planted(2000, 6, seed=3)
    noise = np.random.default_rng(4).standard_normal(500).astype(np.float32)
    model = REFERENCES[name].build(FAST, Objective("regression"), lagged(x.shape[1]), 0)
    info = model.fit(Fold(x[:1500], y[:1500]), Fold(x[1500:], noise))
    assert info["best_iteration"] < 60


@pytest.mark.parametrize("name", ["lightgbm", "xgboost", "catboost", "mlp"])
def test_same_seed_same_scores(name: str) -> None:
    x, y = planted(1500, 5, seed=5)
    scores = []
    for _ in range(2):
        model = REFERENCES[name].build(FAST, Objective("regression"), lagged(x.shape[1]), 7)
        model.fit(Fold(x[:1000], y[:1000]), Fold(x[1000:1250], y[1000:1250]))
        scores.append(model.predict(x[1250:]))
    np.testing.assert_array_equal(scores[0], scores[1])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(10, 60), st.integers(1, 6), st.floats(0.0, 10.0))
def test_linear_is_the_least_squares_solution(seed: int, n: int, d: int, alpha: float) -> None:
    """OLS = lstsq; ridge = (XᵀX + αI)⁻¹Xᵀy (no intercept, Qlib's default); missing features count as 0."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    x[rng.random((n, d)) < 0.1] = np.nan
    filled = np.nan_to_num(x)
    for estimator, expected in (
        ("ols", np.linalg.lstsq(filled, y, rcond=None)[0]),
        ("ridge", np.linalg.solve(filled.T @ filled + alpha * np.eye(d), filled.T @ y)),
    ):
        model = LinearReference(LinearConfig(estimator=estimator, alpha=alpha), Objective("regression"), 0)
        model.fit(Fold(x.astype(np.float32), y.astype(np.float32)), Fold(x[:1], y[:1]))
        probe = rng.standard_normal((4, d))
        np.testing.assert_allclose(model.predict(probe.astype(np.float32)), probe @ expected, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", ["lightgbm", "mlp"])
def test_missing_features_are_taken(name: str) -> None:
    x, y = planted(2000, 5, seed=6)
    x[np.random.default_rng(0).random(x.shape) < 0.2] = np.nan
    model = REFERENCES[name].build(FAST, Objective("regression"), lagged(x.shape[1]), 0)
    model.fit(Fold(x[:1500], y[:1500]), Fold(x[1500:1750], y[1500:1750]))
    assert np.isfinite(model.predict(x[1750:])).all()


def two_clients_with_opposite_rules() -> tuple[np.ndarray, np.ndarray, list[ClientData]]:  # dates: DAYS[:2000]
    """SYNTHETIC: client a's target is +x·w, client b's −x·w; rows 0..599 train, 600..799 val, 800..999 test."""
    x, y = planted(2000, 4, seed=8, noise=0.1)
    y[1000:] *= -1
    clients = [
        ClientData(name, np.arange(0, 600) + off, np.arange(600, 800) + off, np.arange(800, 1000) + off)
        for name, off in (("a", 0), ("b", 1000))
    ]
    return x, y, clients


def test_local_mode_fits_each_clients_own_rule_and_pooled_cannot() -> None:
    """Opposite rules: each local model explains its client's targets; the pooled model, one fit for
    both, explains neither (its error stays near the targets' variance)."""
    x, y, clients = two_clients_with_opposite_rules()
    for mode, low, high in (("local", 0.0, 0.05), ("pooled", 0.8, 1.2)):
        options = FAST.model_copy(update={"mode": mode})
        scores, fits = fit_and_score(
            "linear", options, Objective("regression"), lagged(x.shape[1]), x, y, DAYS[:2000], clients, seed=0
        )
        assert set(fits) == ({"a", "b"} if mode == "local" else {"pooled"})
        for c in clients:
            relative_error = np.mean((scores[c.test] - y[c.test]) ** 2) / np.var(y[c.test])
            assert low <= relative_error <= high, (mode, c.client_id, relative_error)
        assert np.isfinite(scores[: 2 * 1000]).all()  # every row scored, training rows in sample (the train loss)
        for c in clients:  # in sample, each local rule explains its own training rows as well as its test rows
            in_sample = np.mean((scores[c.train] - y[c.train]) ** 2) / np.var(y[c.train])
            assert low <= in_sample <= high, (mode, c.client_id, in_sample)


def test_a_client_without_validation_rows_stops_on_its_training_rows() -> None:
    x, y, clients = two_clients_with_opposite_rules()
    clients[0] = ClientData("a", clients[0].train, np.array([], dtype=np.int64), clients[0].test)
    options = FAST.model_copy(update={"mode": "local"})
    scores, fits = fit_and_score(
        "lightgbm", options, Objective("regression"), lagged(x.shape[1]), x, y, DAYS[:2000], clients, seed=0
    )
    assert fits["a"]["best_iteration"] > 0
    assert pearsonr(scores[clients[0].test], y[clients[0].test]).statistic > 0.8


@pytest.mark.parametrize("name", ["linear", "lightgbm", "xgboost", "catboost"])
def test_fit_and_score_classifies_with_derived_seeds(name: str) -> None:
    """Seeds derived per client are 63-bit; every library must accept what reaches it."""
    x, y, clients = two_clients_with_opposite_rules()
    labels = (y > 0).astype(np.float32)
    options = FAST.model_copy(update={"mode": "local"})
    scores, _ = fit_and_score(
        name, options, Objective("classification", 2), lagged(4), x, labels, DAYS[:2000], clients, 3
    )
    for c in clients:
        assert float(np.mean(scores[c.test] == labels[c.test])) > 0.8


class Recorder:
    """A `fedloom.progress.Progress` that keeps what it was told."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, int, list[int]]] = []

    def task(self, description: str, total: int):
        self.tasks.append((description, total, []))
        return self.tasks[-1][2].append


@pytest.mark.parametrize(("name", "stops_early"), [("mlp", False), ("gru", True)])
def test_a_neural_fit_reports_each_check_and_closes_its_task(name: str, stops_early: bool) -> None:
    """Validation targets unrelated to the features: the GRU stops early (patience 5 of 25 epochs), the
    MLP runs its 600 steps (patience 50 > its 30 checks); either way the task ends at its total."""
    x, y = planted(2000, 6, seed=3)
    noise = np.random.default_rng(4).standard_normal(500).astype(np.float32)
    recorder = Recorder()
    model = REFERENCES[name].build(FAST, Objective("regression"), lagged(x.shape[1]), 0)
    info = model.fit(Fold(x[:1500], y[:1500]), Fold(x[1500:], noise), recorder)
    ((description, total, advances),) = recorder.tasks
    assert "checks" in description and sum(advances) == total
    checks = [a for a in advances if a == 1]  # one per validation; an early stop adds the rest at once
    assert (len(checks) < total) == stops_early and (info["steps"] < {"mlp": 600, "gru": 25 * 12}[name]) == stops_early
