"""Accuracy, balanced accuracy and MCC against scikit-learn, including the multi-class and degenerate cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from fedloom.metrics.classification import accuracy_score, balanced_accuracy, confusion_matrix, matthews_corrcoef


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@settings(max_examples=80, deadline=None)
@given(k=st.integers(2, 4), data=st.data())
def test_match_sklearn(k, data):
    n = data.draw(st.integers(1, 60))
    y = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    p = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    assert accuracy_score(y, p) == pytest.approx(skm.accuracy_score(y, p))
    assert matthews_corrcoef(y, p, k) == pytest.approx(skm.matthews_corrcoef(y, p), abs=1e-12)
    assert balanced_accuracy(y, p, k) == pytest.approx(skm.balanced_accuracy_score(y, p), abs=1e-12)
    np.testing.assert_array_equal(confusion_matrix(y, p, k), skm.confusion_matrix(y, p, labels=list(range(k))))


def test_by_hand():
    assert balanced_accuracy([0, 0, 0, 1], [0, 0, 0, 0]) == 0.5  # the majority guess: 1 / classes present
    assert balanced_accuracy([0, 0, 1, 1], [0, 1, 1, 1]) == pytest.approx(0.75)
    assert matthews_corrcoef([0, 0, 1, 1], [0, 1, 1, 1]) == pytest.approx(1 / np.sqrt(3))
    assert matthews_corrcoef([1, 1, 1], [1, 1, 1]) == 0.0  # undefined → 0, as scikit-learn
    with pytest.raises(ValueError, match=r"class indices must lie in \[0, 2\)"):
        matthews_corrcoef([0, 2], [0, 1])
