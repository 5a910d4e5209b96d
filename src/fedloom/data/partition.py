"""Client partitions: which rows each data owner holds. Splits are applied inside each client.

* ``sector``: one client per ``group`` value (sector, industry) — institutional heterogeneity.
* ``dirichlet``: over stock identities (seed 000, section 4.1, alpha = 0.3): each instrument's rows
  are shared among K clients in proportions drawn from Dir(alpha · 1_K); small alpha puts almost all
  of an instrument on one client, large alpha approaches IID.
* ``task_dirichlet``: the same over task identities of a multi-task table (seed 002, section 4).
* ``iid``: rows shuffled and dealt into K near-equal clients.

Every row belongs to exactly one client. A draw that leaves a client without training rows is redrawn
(up to 100 times, from the same seeded stream, so the result is still deterministic), then rejected.
"""

from __future__ import annotations

import numpy as np

from fedloom.data.schema import ClientData, Partition, Table
from fedloom.errors import DataError

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


def iid_partition(num_rows: int, num_clients: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Rows shuffled and dealt into ``num_clients`` parts whose sizes differ by at most one."""
    parts = np.array_split(rng.permutation(num_rows), num_clients)
    return {_client_name(k, num_clients): np.sort(p) for k, p in enumerate(parts)}


def dirichlet_proportions(num_identities: int, num_clients: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """(identities × clients) row-stochastic matrix: row j ~ Dir(alpha · 1_K), eq. of seed 000 §4.1."""
    if alpha <= 0:
        raise DataError(f"dirichlet alpha must be positive, got {alpha}")
    return rng.dirichlet(np.full(num_clients, float(alpha)), size=num_identities)


def split_by_proportions(rows: np.ndarray, proportions: np.ndarray) -> list[np.ndarray]:
    """Cut ``rows`` (already shuffled) into consecutive parts of sizes ``round(cumsum(p) · n)``.

    >>> [p.tolist() for p in split_by_proportions(np.arange(10), np.array([0.25, 0.25, 0.5]))]
    [[0, 1], [2, 3, 4], [5, 6, 7, 8, 9]]
    """
    cuts = np.round(np.cumsum(proportions)[:-1] * len(rows)).astype(int)
    return np.split(rows, cuts)


def dirichlet_partition(
    identities: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    required: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Share each identity's rows among clients by Dirichlet proportions; redraw while a client has no
    ``required`` row (default: no row at all)."""
    names, inverse = np.unique(identities.astype(str), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(names) + 1))
    groups = [order[bounds[j] : bounds[j + 1]] for j in range(len(names))]
    required = np.ones(len(identities), dtype=bool) if required is None else required
    for _ in range(MAX_DRAWS):
        owner = np.empty(len(identities), dtype=np.int64)
        proportions = dirichlet_proportions(len(names), num_clients, alpha, rng)
        for j, rows in enumerate(groups):
            for k, part in enumerate(split_by_proportions(rng.permutation(rows), proportions[j])):
                owner[part] = k
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
) -> dict[str, np.ndarray]:
    """Client id → row indices of ``table`` under ``method`` (``auto`` = the table's default).

    ``train_rows`` (indices) makes every client hold at least one training row; ``sector`` clients
    without one are reported by `client_views`.
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
        return partition_by_group(identities)
    return dirichlet_partition(identities, num_clients, alpha, rng, required)


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
