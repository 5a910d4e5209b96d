"""Ridge logistic regression (the classifier's penalized head): the optimum's first-order conditions, the
class prior as its limit and its bound, scikit-learn's pipeline on the raw features, absent classes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.tasks.logistic import logistic


def _data(n: int, d: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 20, size=d) + rng.normal(size=d) * 5
    signal = x[:, :1] / x[:, :1].std() if d else np.zeros((n, 1))
    logits = signal * rng.normal(size=(1, classes)) + rng.normal(size=(n, classes))
    y = logits.argmax(1)
    y[:classes] = np.arange(classes)  # every class present
    return torch.from_numpy(x), torch.from_numpy(y)


def _prior_entropy(y: torch.Tensor, classes: int) -> float:
    p = torch.bincount(y, minlength=classes).double() / len(y)
    return float(-(p[p > 0] * p[p > 0].log()).sum())


@settings(max_examples=20, deadline=None)
@given(n=st.integers(8, 60), d=st.integers(1, 8), classes=st.integers(2, 3), alpha=st.floats(1e-1, 1e3),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_the_fit_is_the_penalized_optimum_and_never_loses_to_the_class_prior_in_sample(n, d, classes, alpha, seed):
    """At the optimum of Σ CE + α/2 ‖w‖² (w on standardized features, b free) the gradient vanishes: the fitted
    probabilities average to the class frequencies (b) and Σ (p − y) z = −α w (w); w = 0 is a candidate, so the
    in-sample cross-entropy is at most the prior's, the constant predictor's."""
    x, y = _data(n, d, classes, seed)
    w, b = logistic(x, y, alpha, classes)
    p = torch.softmax(x @ w.T + b, dim=1)
    residual = p - F.one_hot(y, classes).double()
    sd = x.std(0, correction=0)
    z = (x - x.mean(0)) / sd
    w_z = w * sd  # the weights on the standardized features
    # two classes: symmetric logits (−s/2, s/2), the binary fit's weights are w_1 − w_0
    grad_w = residual[:, 1] @ z + alpha * (w_z[1] - w_z[0]) if classes == 2 else residual.T @ z + alpha * w_z
    scale = float(residual.abs().sum()) + 1.0
    assert float(residual.sum(0).abs().max()) <= 1e-5 * scale
    assert float(grad_w.abs().max()) <= 1e-4 * scale
    ce = float(F.cross_entropy(x @ w.T + b, y))
    assert ce <= _prior_entropy(y, classes) + 1e-6


def test_a_huge_penalty_leaves_the_class_prior():
    x, y = _data(200, 4, 2, 0)
    y = torch.where(torch.arange(200) < 140, 0, 1)  # 70 / 30
    w, b = logistic(x, y, 1e9, 2)
    p = torch.softmax(x @ w.T + b, dim=1)
    torch.testing.assert_close(p.mean(0), torch.tensor([0.7, 0.3], dtype=torch.float64), atol=1e-6, rtol=0)
    assert float(p.std(0).max()) < 1e-4
    assert float(F.cross_entropy(x @ w.T + b, y)) == pytest.approx(_prior_entropy(y, 2), abs=1e-6)


@pytest.mark.parametrize("classes", [2, 3])
def test_the_raw_feature_logits_equal_scikit_learns_pipeline(classes):
    """The map back from standardized to raw features (and, for two classes, to symmetric logits) keeps the
    probabilities of scikit-learn's StandardScaler + LogisticRegression."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = _data(120, 6, classes, 3)
    w, b = logistic(x, y, 3.0, classes)
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=1 / 3.0, tol=1e-10, max_iter=10_000))
    expected = reference.fit(x.numpy(), y.numpy()).predict_proba(x.numpy())
    np.testing.assert_allclose(torch.softmax(x @ w.T + b, dim=1).numpy(), expected, atol=1e-5)


def test_an_absent_class_gets_a_small_probability_and_a_single_class_no_weights():
    x, y = _data(50, 3, 3, 1)
    y = torch.where(y == 2, 0, y)  # class 2 never seen
    w, b = logistic(x, y, 1.0, 3)
    p = torch.softmax(x @ w.T + b, dim=1)
    assert torch.equal(w[2], torch.zeros(3, dtype=torch.float64)) and float(p[:, 2].max()) < 1 / 51 * 1.01
    w1, b1 = logistic(x, torch.zeros(50, dtype=torch.long), 1.0, 2)
    assert torch.equal(w1, torch.zeros_like(w1))
    assert float(b1[0] - b1[1]) == pytest.approx(math.log(51))
    w0, b0 = logistic(x[:0], y[:0], 1.0, 2)
    assert w0.shape == (2, 3) and torch.equal(b0, torch.zeros(2, dtype=torch.float64))
