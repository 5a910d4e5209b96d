"""Client partitions: sector, IID, Dirichlet over stocks, task-Dirichlet; coverage and empty clients."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.data.partition import (
    client_views,
    dirichlet_partition,
    iid_partition,
    partition_by_group,
    partition_table,
    split_by_proportions,
)
from fedloom.data.schema import SampleTable, TextTable
from fedloom.errors import DataError


def _market(instruments: int, days: int) -> SampleTable:
    frame = pd.DataFrame(
        {
            "date": np.tile(pd.bdate_range("2022-01-03", periods=days), instruments),
            "instrument": np.repeat([f"S{i}" for i in range(instruments)], days),
            "group": np.repeat([f"sector{i % 3}" for i in range(instruments)], days),
            "text": "",
            "target": 0.0,
        }
    )
    return SampleTable(frame, (), "m", default_partition="dirichlet")


def _covers_once(parts: dict[str, np.ndarray], n: int) -> None:
    everything = np.sort(np.concatenate(list(parts.values())))
    assert everything.tolist() == list(range(n))


def test_one_client_per_group_covering_every_row():
    groups = np.array(["tech", "fin", "tech", "energy", "fin"])
    parts = partition_by_group(groups)
    assert list(parts) == ["energy", "fin", "tech"]
    assert parts["tech"].tolist() == [0, 2]
    _covers_once(parts, 5)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(10, 300), k=st.integers(1, 10), seed=st.integers(0, 10_000))
def test_iid_covers_every_row_once_in_near_equal_parts(n, k, seed):
    parts = iid_partition(n, k, np.random.default_rng(seed))
    _covers_once(parts, n)
    sizes = [len(p) for p in parts.values()]
    assert len(parts) == k and max(sizes) - min(sizes) <= 1


@settings(max_examples=40, deadline=None)
@given(
    identities=st.integers(1, 12),
    rows=st.integers(5, 40),
    k=st.integers(1, 6),
    alpha=st.sampled_from([0.1, 0.3, 1.0, 10.0]),
    seed=st.integers(0, 10_000),
)
def test_dirichlet_covers_every_row_once_and_never_leaves_a_client_empty(identities, rows, k, alpha, seed):
    ids = np.repeat(np.arange(identities), rows).astype(str)
    try:
        parts = dirichlet_partition(ids, k, alpha, np.random.default_rng(seed))
    except DataError as exc:
        assert "left a client without training rows" in str(exc)
        return
    _covers_once(parts, len(ids))
    assert len(parts) == k and all(len(p) > 0 for p in parts.values())


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 500), p=st.lists(st.floats(0.01, 1), min_size=1, max_size=8))
def test_rows_follow_the_drawn_proportions(n, p):
    proportions = np.array(p) / np.sum(p)
    parts = split_by_proportions(np.arange(n), proportions)
    assert sum(len(x) for x in parts) == n
    np.testing.assert_allclose([len(x) for x in parts], proportions * n, atol=1.0 + 1e-9)


def test_alpha_controls_how_concentrated_each_stock_is():
    """Mean largest client share of a stock: Dirichlet(α·1_K) gives ≈ 1 for small α, ≈ 1/K for large α."""
    ids = np.repeat(np.arange(40), 200).astype(str)

    def concentration(alpha: float) -> float:
        parts = dirichlet_partition(ids, 5, alpha, np.random.default_rng(0))
        owner = np.empty(len(ids), int)
        for k, rows in enumerate(parts.values()):
            owner[rows] = k
        shares = pd.crosstab(ids, owner, normalize="index")
        return float(shares.max(axis=1).mean())

    assert concentration(0.05) > 0.9 > 0.5 > concentration(100.0) > 0.2


def test_partition_table_dispatch_and_training_rows():
    table = _market(instruments=12, days=30)
    train = np.flatnonzero(table.frame["date"] < "2022-02-01")
    parts = partition_table(table, "auto", 4, 0.3, seed=1, train_rows=train)
    assert len(parts) == 4 and all(np.isin(p, train).any() for p in parts.values())
    assert parts.keys() == partition_table(table, "dirichlet", 4, 0.3, seed=1, train_rows=train).keys()
    again = partition_table(table, "dirichlet", 4, 0.3, seed=1, train_rows=train)
    assert all(np.array_equal(parts[k], again[k]) for k in parts)
    assert list(partition_table(table, "sector", 99, 0.3, seed=0)) == ["sector0", "sector1", "sector2"]


def test_task_dirichlet_on_text_tables():
    frame = pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(40)],
            "task": np.repeat(["gsm8k", "arc", "jfleg", "tweeteval"], 10),
            "split": "train",
            "prompt": "p",
            "response": "r",
            "references": [("r",)] * 40,
            "label": "",
        }
    )
    table = TextTable(frame, "mix")
    parts = partition_table(table, "auto", 3, 0.3, seed=0)
    _covers_once(parts, 40)
    with pytest.raises(DataError, match="partition 'sector' needs a financial table"):
        partition_table(table, "sector", 3, 0.3, seed=0)
    with pytest.raises(DataError, match="'task_dirichlet' needs a text table"):
        partition_table(_market(3, 5), "task_dirichlet", 3, 0.3, seed=0)


def test_empty_clients_are_rejected_with_a_clear_error():
    table = _market(instruments=1, days=3)
    with pytest.raises(
        DataError, match=r"iid partition: client 'client3' has no rows; use fewer clients \(there are 5\)"
    ):
        partition_table(table, "iid", 5, 0.3, seed=0)
    with pytest.raises(DataError, match=r"dirichlet partition \(alpha=0.3\) left a client without training rows"):
        partition_table(table, "dirichlet", 5, 0.3, seed=0)


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
