"""Sector partition and per-client split views."""

from __future__ import annotations

import numpy as np
import pytest

from fedloom.data import client_views, partition_by_group
from fedloom.errors import DataError


def test_one_client_per_group_covering_every_row():
    groups = np.array(["tech", "fin", "tech", "energy", "fin"])
    parts = partition_by_group(groups)
    assert list(parts) == ["energy", "fin", "tech"]
    assert parts["tech"].tolist() == [0, 2]
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(5))


def test_client_views_intersect_splits():
    parts = {"a": np.array([0, 1, 2, 3]), "b": np.array([4, 5])}
    splits = {"train": np.array([0, 1, 4]), "val": np.array([2, 5]), "test": np.array([3])}
    a, b = client_views(parts, splits)
    assert (a.train.tolist(), a.val.tolist(), a.test.tolist()) == ([0, 1], [2], [3])
    assert (b.train.tolist(), b.val.tolist(), b.test.tolist()) == ([4], [5], [])


def test_client_without_training_rows_is_rejected():
    parts = {"a": np.array([0]), "late": np.array([1])}
    splits = {"train": np.array([0]), "val": np.array([1]), "test": np.array([], dtype=int)}
    with pytest.raises(DataError, match="client 'late' has no training rows"):
        client_views(parts, splits)
