"""Closed-form ridge against scikit-learn's (fewer rows than features too), from rows and from summed client
moments; α chosen by a validation score."""

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


@settings(max_examples=25, deadline=None)
@given(parts=st.lists(st.integers(1, 25), min_size=1, max_size=5), d=st.integers(1, 12), k=st.integers(1, 3),
       alpha=st.floats(1e-2, 1e3), seed=st.integers(0, 2**16))  # fmt: skip
def test_summed_client_moments_solve_the_pooled_ridge(parts, d, k, alpha, seed):
    """The federated probe: every client's moments summed give scikit-learn's ridge on the pooled rows."""
    from fedloom.tasks.ridge import Moments

    rng = np.random.default_rng(seed)
    shift, scale = rng.normal(size=d) * 10, rng.uniform(0.1, 50, size=d)
    xs = [rng.normal(size=(m, d)) * scale + shift + rng.normal(size=d) for m in parts]  # each client shifted
    ys = [rng.normal(size=(m, k)) for m in parts]
    total = sum((Moments.of(torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(xs, ys, strict=True)),
                start=Moments.of(torch.zeros(0, d), torch.zeros(0, k)))  # fmt: skip
    x, y = np.concatenate(xs), np.concatenate(ys)
    if len(x) < 2:
        return
    w, b = total.solve(alpha)
    mu, sd = x.mean(0), x.std(0)
    sd = np.where(sd > 1e-12 * (1 + np.abs(mu)), sd, 1.0)
    reference = Ridge(alpha=alpha, fit_intercept=True, solver="cholesky").fit((x - mu) / sd, y)
    expected = reference.predict((x - mu) / sd).reshape(len(x), k)
    np.testing.assert_allclose(x @ w.numpy().T + b.numpy(), expected, rtol=1e-6, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 30), d=st.integers(1, 8), k=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_the_squared_error_from_moments_is_the_squared_error_of_the_rows(n, d, k, seed):
    from fedloom.tasks.ridge import Moments

    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, d)) * 3 + 1, rng.normal(size=(n, k))
    w, b = torch.from_numpy(rng.normal(size=(k, d))), torch.from_numpy(rng.normal(size=k))
    direct = float(((y - x @ w.numpy().T - b.numpy()) ** 2).sum())
    from_moments = Moments.of(torch.from_numpy(x), torch.from_numpy(y)).sse(w, b)
    assert from_moments == pytest.approx(direct, rel=1e-9, abs=1e-8)


def test_the_moments_path_picks_alpha_on_the_validation_moments_like_the_row_path():
    from fedloom.tasks.ridge import Moments, moments_path

    rng = np.random.default_rng(1)
    beta = torch.tensor([[1.0], [0.5], [0.0], [0.0], [-1.0]], dtype=torch.float64)
    x, xv = torch.from_numpy(rng.normal(size=(30, 5))), torch.from_numpy(rng.normal(size=(20, 5)))
    y, yv = x @ beta + torch.from_numpy(rng.normal(size=(30, 1))), xv @ beta
    w, b, alpha = moments_path(Moments.of(x, y), Moments.of(xv, yv))
    w2, b2, alpha2 = ridge_path(x, y, lambda w, b: float(((xv @ w.T + b - yv) ** 2).sum()))
    assert alpha == alpha2 and torch.allclose(w, w2, atol=1e-8) and torch.allclose(b, b2, atol=1e-8)
