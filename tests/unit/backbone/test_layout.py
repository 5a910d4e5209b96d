"""Flat-vector views are exact inverses and check shapes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.backbone.layout import TensorLayout
from fedloom.errors import UploadError

shapes = st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), min_size=1, max_size=5)


@settings(max_examples=50, deadline=None)
@given(shapes=shapes, seed=st.integers(0, 1000))
def test_flatten_then_unflatten_is_identity(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    tensors = {f"t{i}": torch.randn(s, generator=g) for i, s in enumerate(shapes)}
    layout = TensorLayout.of(tensors)
    flat = layout.flatten(tensors)
    assert flat.shape == (layout.numel,)
    back = layout.unflatten(flat)
    assert list(back) == list(tensors)
    assert all(torch.equal(back[k], tensors[k]) for k in tensors)
    torch.testing.assert_close(layout.flatten(back), flat)


def test_order_is_the_layout_order_not_the_dict_order():
    layout = TensorLayout((("b", (2,)), ("a", (1,))))
    flat = layout.flatten({"a": torch.tensor([9.0]), "b": torch.tensor([1.0, 2.0])})
    assert flat.tolist() == [1.0, 2.0, 9.0]


def test_shape_and_key_errors():
    layout = TensorLayout((("w", (2, 2)),))
    with pytest.raises(UploadError, match=r"'w' has shape \(3,\), expected \(2, 2\)"):
        layout.flatten({"w": torch.zeros(3)})
    with pytest.raises(UploadError, match="'w' is missing"):
        layout.flatten({})
    with pytest.raises(UploadError, match=r"expected \(4,\)"):
        layout.unflatten(torch.zeros(5))
