"""Client partitions: which rows each data owner holds. Splits are applied inside each client.

* ``sector``: one client per ``group`` value (sector, industry) — institutional heterogeneity.
* ``dirichlet``: over stock identities (seed 000, section 4.1, alpha = 0.3): each instrument's rows
  are shared among K clients in proportions drawn from Dir(alpha · 1_K); small alpha puts almost all
  of an instrument on one client, large alpha approaches IID.
* ``task_dirichlet``: the same over task identities of a multi-task table (seed 002, section 4).
* ``iid``: rows shuffled and dealt into K near-equal clients.

Every row belongs to exactly one client. A draw that leaves a client without training rows is redrawn
(up to 100 times, from the same seeded stream, so the result is still deterministic), then rejected.
A Dirichlet row's owner depends on the seed, its identity and its date alone (`dirichlet_partition`), so
a table cut to fewer test dates keeps every other row on the same client (before 2026-12-06 the rows
were dealt by a shuffle whose outcome moved with the table's size).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np

from fedloom.data.schema import ClientData, Partition, Table
from fedloom.errors import DataError

if TYPE_CHECKING:
    from fedloom.data.config import DataConfig

MAX_DRAWS = 100
# Why a table cannot take a partition it has no column for (see `Table.partition_columns`).
_UNSUPPORTED = {
    "sector": "partition 'sector' needs a financial table; {name!r} is a text dataset",
    "dirichlet": "partition 'dirichlet' is over stock identities; for {name!r} use task_dirichlet",
    "task_dirichlet": "partition 'task_dirichlet' needs a text table with a task column; got {name!r}",
}


def partition_by_group(groups: np.ndarray) -> dict[str, np.ndarray]:
    """One client per distinct group value (sector, industry): client id = the group name."""
    names = sorted({str(g) for g in groups})
    return {name: np.flatnonzero(groups.astype(str) == name) for name in names}


def merged_groups(groups: np.ndarray, instruments: np.ndarray, min_names: int) -> np.ndarray:
    """``groups`` with the smallest merged until each holds ``min_names`` instruments (issue 43: a client of
    one or two names has no cross-section to rank). Repeatedly the group with the fewest names (ties: by
    name) joins the next fewest, named ``A+B``; one group is left as it is. A row's group is its
    instrument's, so the merge is the same whatever dates the table keeps.

    >>> merged_groups(np.array(["a", "a", "b", "c", "c"]), np.array(["x", "y", "z", "u", "v"]), 2).tolist()
    ['a', 'a', 'b+c', 'b+c', 'b+c']
    """
    groups = groups.astype(str)
    members = {g: set(instruments[groups == g].astype(str)) for g in np.unique(groups)}
    label = {g: g for g in members}  # original group → its merged group's name
    while len(members) > 1:
        small, other = sorted(members, key=lambda g: (len(members[g]), g))[:2]
        if len(members[small]) >= min_names:
            break
        name = f"{small}+{other}"
        members[name] = members.pop(small) | members.pop(other)
        label = {g: name if m in (small, other) else m for g, m in label.items()}
    return np.array([label[g] for g in groups], dtype=object)


def iid_partition(num_rows: int, num_clients: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Rows shuffled and dealt into ``num_clients`` parts whose sizes differ by at most one."""
    parts = np.array_split(rng.permutation(num_rows), num_clients)
    return {_client_name(k, num_clients): np.sort(p) for k, p in enumerate(parts)}


def dirichlet_proportions(codes: np.ndarray, num_clients: int, alpha: float, seed: int, draw: int = 0) -> np.ndarray:
    """(identities × clients) row-stochastic matrix: row j ~ Dir(alpha · 1_K) (seed 000 §4.1), drawn from a
    stream of (seed, draw, identity j's `identity_codes`) alone, so an identity's proportions do not depend on
    the others present."""
    if alpha <= 0:
        raise DataError(f"dirichlet alpha must be positive, got {alpha}")
    concentration = np.full(num_clients, float(alpha))
    return np.stack([np.random.default_rng([seed, draw, int(c)]).dirichlet(concentration) for c in codes]).reshape(
        len(codes), num_clients
    )


def identity_codes(names: np.ndarray) -> np.ndarray:
    """A stable integer per identity name (CRC-32 of its text): the same in every table and process."""
    return np.array([zlib.crc32(str(n).encode()) for n in names], dtype=np.uint64)


def row_uniforms(seed: int, draw: int, identity_codes: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """A uniform in [0, 1) per row, a hash (splitmix64's finalizer) of (seed, draw, identity, key) alone: the
    same row gets the same number whatever other rows the table holds."""
    x = (
        np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        ^ np.uint64(draw) * np.uint64(0xD1B54A32D192ED03)
        ^ identity_codes.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        ^ keys.astype(np.int64).view(np.uint64) * np.uint64(0x94D049BB133111EB)
    )
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def dirichlet_partition(
    identities: np.ndarray,
    num_clients: int,
    alpha: float,
    seed: int,
    required: np.ndarray | None = None,
    keys: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Share each identity's rows among clients by Dirichlet proportions; redraw while a client has no
    ``required`` row (default: no row at all).

    A row goes to the client whose slice of [0, 1) (cut by its identity's proportions) holds the row's
    `row_uniforms` draw, so its owner is a function of (seed, identity, ``keys`` value) only: thinning the
    table (fewer test dates) never moves a kept row to another client. ``keys`` tell an identity's rows
    apart (a financial table's dates; default: the row's position among its identity's rows)."""
    names, inverse = np.unique(identities.astype(str), return_inverse=True)
    if keys is None:
        order = np.argsort(inverse, kind="stable")
        keys = np.empty(len(inverse), dtype=np.int64)
        keys[order] = np.arange(len(inverse)) - np.searchsorted(inverse[order], inverse[order])
    codes = identity_codes(names)
    keys = np.asarray(keys)
    required = np.ones(len(identities), dtype=bool) if required is None else required
    with np.errstate(over="ignore"):
        for draw in range(MAX_DRAWS):
            bounds = np.cumsum(dirichlet_proportions(codes, num_clients, alpha, seed, draw), axis=1)[inverse]
            u = row_uniforms(seed, draw, codes[inverse], keys)
            owner = np.minimum((u[:, None] >= bounds).sum(axis=1), num_clients - 1)
            if np.all(np.bincount(owner[required], minlength=num_clients) > 0):
                return {_client_name(k, num_clients): np.flatnonzero(owner == k) for k in range(num_clients)}
    raise DataError(
        f"dirichlet partition (alpha={alpha}) left a client without training rows in {MAX_DRAWS} draws: "
        f"{num_clients} clients over {len(names)} identities and {int(required.sum())} training rows; "
        "use fewer clients or a larger alpha"
    )


def partition_table(
    table: Table,
    method: Partition | str,
    num_clients: int,
    alpha: float,
    seed: int,
    train_rows: np.ndarray | None = None,
    min_names: int = 1,
) -> dict[str, np.ndarray]:
    """Client id → row indices of ``table`` under ``method`` (``auto`` = the table's default).

    ``train_rows`` (indices) makes every client hold at least one training row; ``sector`` clients
    without one are reported by `client_views`. ``min_names``: ``sector`` groups with fewer instruments are
    merged (`merged_groups`).
    """
    if method == "auto":
        method = table.default_partition
    rng = np.random.default_rng([seed, 7219])
    required = None
    if train_rows is not None:
        required = np.zeros(len(table), dtype=bool)
        required[train_rows] = True
    if method in ("dirichlet", "task_dirichlet", "iid") and num_clients < 1:
        raise DataError(f"data.num_clients must be at least 1, got {num_clients}")
    if method == "iid":
        parts = iid_partition(len(table), num_clients, rng)
        _reject_empty(parts, required, method)
        return parts
    if method not in _UNSUPPORTED:
        raise DataError(f"unknown partition {method!r}; expected auto, sector, dirichlet, iid or task_dirichlet")
    if method not in table.partition_columns:
        raise DataError(_UNSUPPORTED[method].format(name=table.name))
    identities = table.frame[table.partition_columns[method]].to_numpy()
    if method == "sector":
        if min_names > 1:
            identities = merged_groups(identities, table.frame["instrument"].to_numpy(), min_names)
        return partition_by_group(identities)
    frame = table.frame
    keys = np.asarray(frame["date"], dtype="datetime64[D]").astype(np.int64) if "date" in frame.columns else None
    return dirichlet_partition(identities, num_clients, alpha, seed, required, keys)


def configured_partition(table: Table, cfg: DataConfig, train_rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """`partition_table` under the partition ``cfg`` names (method, clients, α, seed, fewest names): what a
    run's clients are and what ``fedloom data info`` describes, from one place."""
    return partition_table(table, cfg.partition, cfg.num_clients, cfg.alpha, cfg.partition_seed, train_rows,
                           cfg.min_names)  # fmt: skip


def client_views(partition: dict[str, np.ndarray], splits: dict[str, np.ndarray]) -> list[ClientData]:
    """Intersect each client's rows with the global split; a client without training rows is an error."""
    clients = []
    for client_id, rows in partition.items():
        parts = {name: np.intersect1d(rows, idx) for name, idx in splits.items()}
        if len(parts["train"]) == 0:
            raise DataError(
                f"client {client_id!r} has no training rows ({len(rows)} rows in total); "
                "use fewer clients or a different partition"
            )
        clients.append(ClientData(client_id, parts["train"], parts["val"], parts["test"]))
    return clients


def _reject_empty(parts: dict[str, np.ndarray], required: np.ndarray | None, method: str) -> None:
    for name, rows in parts.items():
        if len(rows) == 0 or (required is not None and not required[rows].any()):
            raise DataError(
                f"{method} partition: client {name!r} has no {'training ' if required is not None else ''}rows; "
                f"use fewer clients (there are {len(parts)})"
            )


def _client_name(k: int, num_clients: int) -> str:
    return f"client{k:0{len(str(num_clients - 1))}d}"
