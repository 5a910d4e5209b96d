"""Client heterogeneity score (seed 000, eq. 26) against scipy's Jensen–Shannon and a hand case."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.special import rel_entr

from fedloom.metrics.heterogeneity import heterogeneity_scores, jensen_shannon_divergence, label_histograms


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 10), min_size=2, max_size=8), st.data())
def test_jsd_matches_scipy(p, data):
    q = data.draw(st.lists(st.floats(0.01, 10), min_size=len(p), max_size=len(p)))
    reference = jensenshannon(p, q, base=2) ** 2
    if np.isnan(reference):  # scipy takes the root of a round-off negative (≈ −1e-17) when p ∝ q
        a, b = np.asarray(p) / np.sum(p), np.asarray(q) / np.sum(q)
        m = (a + b) / 2
        reference = (rel_entr(a, m).sum() + rel_entr(b, m).sum()) / 2 / np.log(2)  # scipy's own terms
    assert jensen_shannon_divergence(p, q) == pytest.approx(reference, abs=1e-12)


def test_score_by_hand():
    # classes: client a all 0, client b half/half → pooled 3/4, 1/4
    targets = {"a": np.array([0, 0]), "b": np.array([0, 1])}
    covariates = {"a": np.array([[0.0], [0.0]]), "b": np.array([[2.0], [2.0]])}
    scores = heterogeneity_scores(targets, covariates, bins=None, lam=0.5)
    pooled = [0.75, 0.25]
    # pooled covariate mean 1: both clients are 1 away, the mean distance is 1
    assert scores["a"] == pytest.approx(jensenshannon([1, 0], pooled, base=2) ** 2 + 0.5)
    assert scores["b"] == pytest.approx(jensenshannon([0.5, 0.5], pooled, base=2) ** 2 + 0.5)


def test_return_bins_are_pooled_quantiles():
    rng = np.random.default_rng(0)
    targets = {"a": rng.normal(0, 1, 500), "b": rng.normal(2, 1, 500)}
    hist, pooled = label_histograms(targets, bins=4)
    np.testing.assert_allclose(pooled, 250, atol=1)  # quartile bins of the pooled sample
    assert hist["a"][0] > hist["a"][-1] and hist["b"][-1] > hist["b"][0]
    with pytest.raises(ValueError, match="name different clients"):
        heterogeneity_scores(targets, {"a": np.zeros((1, 1))})
