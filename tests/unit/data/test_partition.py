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
    dirichlet_proportions,
    identity_codes,
    iid_partition,
    merged_groups,
    partition_by_group,
    partition_table,
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


def test_small_groups_merge_smallest_first_until_each_holds_enough_names():
    # a: 4 names, b: 1, c: 2, d: 3 -> b+c (3 names), then b+c joins d (ties by name: "b+c" < "d")
    names = {"a": ["p", "q", "r", "s"], "b": ["t"], "c": ["u", "v"], "d": ["w", "x", "y"]}
    groups = np.array([g for g, ns in names.items() for _ in ns] * 2)  # two dates of every name
    instruments = np.array([n for ns in names.values() for n in ns] * 2)
    merged = merged_groups(groups, instruments, 4)
    assert sorted(set(merged)) == ["a", "b+c+d"]
    for g in set(merged):  # each merged group holds >= 4 names, every row of a name in one group
        assert len(set(instruments[merged == g])) >= 4
    assert all(len(set(merged[instruments == n])) == 1 for n in set(instruments))
    assert (merged_groups(groups, instruments, 1) == groups).all()  # nothing to merge


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=12), need=st.integers(1, 8))
def test_merged_groups_reach_the_minimum_unless_one_group_is_left(sizes, need):
    groups = np.array([f"g{i:02d}" for i, n in enumerate(sizes) for _ in range(n)])
    instruments = np.array([f"g{i:02d}-{k}" for i, n in enumerate(sizes) for k in range(n)])
    merged = merged_groups(groups, instruments, need)
    counts = [len(set(instruments[merged == g])) for g in set(merged)]
    assert min(counts) >= need or len(counts) == 1
    assert sum(counts) == len(instruments)


def test_sector_partition_merges_with_min_names():
    table = _market(6, 3)
    table = SampleTable(table.frame.assign(group=np.repeat(["x", "x", "x", "y", "z", "z"], 3)), (), "m")
    assert list(partition_table(table, "sector", 0, 0.3, seed=0)) == ["x", "y", "z"]
    parts = partition_table(table, "sector", 0, 0.3, seed=0, min_names=3)
    assert list(parts) == ["x", "y+z"] and len(parts["y+z"]) == 9


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
        parts = dirichlet_partition(ids, k, alpha, seed)
    except DataError as exc:
        assert "left a client without training rows" in str(exc)
        return
    _covers_once(parts, len(ids))
    assert len(parts) == k and all(len(p) > 0 for p in parts.values())


@settings(max_examples=40, deadline=None)
@given(
    identities=st.integers(1, 8),
    days=st.integers(20, 60),
    k=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    drop=st.floats(0.0, 0.9),
    gone=st.integers(0, 7),
)
def test_thinning_the_table_keeps_every_kept_row_on_its_client(identities, days, k, seed, drop, gone):
    """Fewer test dates (or a name missing) must not reshuffle the clients: a kept row keeps its owner."""
    ids = np.repeat([f"S{i}" for i in range(identities)], days)
    dates = np.tile(np.arange(days), identities)
    try:
        full = dirichlet_partition(ids, k, 0.3, seed, keys=dates)
    except DataError:
        return
    keep = (np.random.default_rng(seed).random(len(ids)) >= drop) & (ids != f"S{gone}")
    keep[np.concatenate([p[:1] for p in full.values()])] = True  # every client keeps a row: no redraw
    thin = dirichlet_partition(ids[keep], k, 0.3, seed, keys=dates[keep])
    owner_full = {int(r): c for c, rows in full.items() for r in rows}
    kept = np.flatnonzero(keep)
    assert all(owner_full[int(kept[r])] == c for c, rows in thin.items() for r in rows)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_an_identitys_rows_follow_its_drawn_proportions(k, seed):
    """Each row's hashed uniform lands in its client's slice: shares match Dir(α) draws within 5 binomial sd."""
    n = 20_000
    ids = np.full(n, "S0")
    parts = dirichlet_partition(ids, k, 1.0, seed)
    (p,) = dirichlet_proportions(identity_codes(np.array(["S0"])), k, 1.0, seed, draw=0)
    if p.min() * n < 5:  # draw 0 may leave a client empty and be redrawn with other proportions
        return
    shares = np.array([len(r) for r in parts.values()]) / n
    np.testing.assert_allclose(shares, p, atol=5 * np.sqrt(0.25 / n))


def test_alpha_controls_how_concentrated_each_stock_is():
    """Mean largest client share of a stock: Dirichlet(α·1_K) gives ≈ 1 for small α, ≈ 1/K for large α."""
    ids = np.repeat(np.arange(40), 200).astype(str)

    def concentration(alpha: float) -> float:
        parts = dirichlet_partition(ids, 5, alpha, 0)
        owner = np.empty(len(ids), int)
        for k, rows in enumerate(parts.values()):
            owner[rows] = k
        shares = pd.crosstab(ids, owner, normalize="index")
        return float(shares.max(axis=1).mean())

    # E[max share] of Dir(0.05 · 1_5) is 0.885 (its mean over 40 stocks has sd ≈ 0.025); of Dir(100 · 1_5) ≈ 0.23
    assert concentration(0.05) > 0.75 > 0.5 > concentration(100.0) > 0.2


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
