"""Client partitions: which rows each data owner holds. Splits are applied inside each client."""

from __future__ import annotations

import numpy as np

from fedloom.data.schema import ClientData
from fedloom.errors import DataError


def partition_by_group(groups: np.ndarray) -> dict[str, np.ndarray]:
    """One client per distinct group value (sector, industry): client id = the group name."""
    names = sorted({str(g) for g in groups})
    return {name: np.flatnonzero(groups.astype(str) == name) for name in names}


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
