"""Weighted averaging: hand-computed case and properties."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.algorithms.aggregation import weighted_average
from fedloom.errors import UploadError


def test_two_clients_by_hand():
    # Prepare: client a (n=1) sends 1s, client b (n=3) sends 5s
    ups = [{"w": torch.ones(2, 2)}, {"w": torch.full((2, 2), 5.0)}]
    # Execute
    out = weighted_average(ups, [1, 3])
    # Assert: (1·1 + 3·5) / 4 = 4
    assert torch.equal(out["w"], torch.full((2, 2), 4.0))


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 5), seed=st.integers(0, 999), scale=st.floats(0.1, 100))
def test_convexity_and_weight_scale_invariance(k, seed, scale):
    g = torch.Generator().manual_seed(seed)
    ups = [{"w": torch.randn(3, generator=g)} for _ in range(k)]
    w = torch.rand(k, generator=g).add(0.1).tolist()
    out = weighted_average(ups, w)["w"]
    torch.testing.assert_close(out, weighted_average(ups, [x * scale for x in w])["w"])
    stacked = torch.stack([u["w"] for u in ups])
    assert torch.all(out <= stacked.max(0).values + 1e-6) and torch.all(out >= stacked.min(0).values - 1e-6)


def test_bad_weights():
    with pytest.raises(UploadError, match="positive"):
        weighted_average([{"w": torch.ones(1)}], [0])
    with pytest.raises(UploadError, match="one weight per upload"):
        weighted_average([{"w": torch.ones(1)}], [1, 2])
