"""Closed-form ridge against scikit-learn's, in the primal (n ≥ d) and kernel (n < d) forms, and α chosen
by a validation score."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import Ridge

from fedloom.tasks.ridge import ridge, ridge_path


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 40), d=st.integers(1, 30), k=st.integers(1, 3), alpha=st.floats(1e-2, 1e3),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_ridge_equals_sklearn_on_standardized_features(n, d, k, alpha, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 50, size=d) + rng.normal(size=d) * 10
    y = rng.normal(size=(n, k))
    w, b = ridge(torch.from_numpy(x), torch.from_numpy(y), alpha)
    mu, sd = x.mean(0), x.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    reference = Ridge(alpha=alpha, fit_intercept=True, solver="cholesky").fit((x - mu) / sd, y)
    expected = reference.predict((x - mu) / sd).reshape(n, k)
    np.testing.assert_allclose(x @ w.numpy().T + b.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_a_constant_feature_gets_no_weight_and_the_intercept_is_the_mean():
    x = torch.tensor([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    y = torch.tensor([[1.0], [2.0], [4.0]])
    w, b = ridge(x, y, 1e6)  # a huge penalty: only the mean is left
    assert w[0, 1] == 0 and torch.allclose(x.double() @ w.T + b, y.double().mean().expand(3, 1), atol=1e-4)


def test_the_path_takes_the_alpha_the_validation_score_prefers():
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(30, 5)))
    beta = torch.tensor([[1.0], [0.5], [0.0], [0.0], [-1.0]], dtype=torch.float64)
    y = x @ beta + 0.1 * torch.from_numpy(rng.normal(size=(30, 1)))
    xv = torch.from_numpy(rng.normal(size=(30, 5)))
    yv = xv @ beta

    def val_mse(w: torch.Tensor, b: torch.Tensor) -> float:
        return float(((xv @ w.T + b - yv) ** 2).mean())

    w, b, alpha = ridge_path(x, y, val_mse, alphas=(1e-2, 1.0, 1e4))
    assert alpha < 1e4 and val_mse(w, b) < 0.05
    assert ridge_path(x, y, val_mse, alphas=(1e4,))[2] == pytest.approx(1e4)
