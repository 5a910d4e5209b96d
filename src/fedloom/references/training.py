"""Train a reference pooled (one model on every client's rows: the centralized, non-private yardstick),
local-only (one model per client on its own rows) or, for a reference fitted from sufficient statistics
(the ridge probe), federated in one pass, and score every validation and test row."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from fedloom.data.schema import ClientData
from fedloom.progress import Progress, SilentProgress
from fedloom.references.base import Fold, Objective, Reference
from fedloom.references.config import ReferenceOptions
from fedloom.references.registry import REFERENCES
from fedloom.seeding import derive_seed

log = logging.getLogger("fedloom")


def fit_and_score(
    name: str,
    options: ReferenceOptions,
    objective: Objective,
    features: Sequence[str],
    x: np.ndarray,
    y: np.ndarray,
    days: np.ndarray,
    clients: Sequence[ClientData],
    seed: int,
    progress: Progress | None = None,
) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    """Scores of every client's rows (training rows in sample: the reference's train loss) and what each fit chose,
    keyed ``pooled`` or by client; ``features`` names the columns of ``x``, ``days`` dates its rows.
    ``progress`` hears of each fit and, from the neural references, of each validation check."""
    scores = np.full(len(y), np.nan, dtype=np.float32)
    if options.mode == "federated":
        model = REFERENCES[name].build(
            options, objective, features, derive_seed(seed, "reference", "federated") % 2**31
        )
        return federated_fit(name, model, x, y, clients, scores)
    groups = {"pooled": list(clients)} if options.mode == "pooled" else {c.client_id: [c] for c in clients}
    progress = progress or SilentProgress()
    advance = progress.task(f"fitting {name} ({options.mode}, {len(groups)} model{'s' * (len(groups) > 1)})",
                            len(groups))  # fmt: skip
    fits = {}
    for key, members in groups.items():
        train, valid = (np.concatenate([c.split(s) for c in members]) for s in ("train", "val"))
        if len(valid) == 0:
            log.warning("%s (%s): no validation rows; early stopping watches the training rows", name, key)
            valid = train
        # below 2**31: every library's seed type takes it (scikit-learn's random_state stops at 2**32)
        model = REFERENCES[name].build(options, objective, features, derive_seed(seed, "reference", key) % 2**31)
        info = model.fit(Fold(x[train], y[train], days[train]), Fold(x[valid], y[valid], days[valid]), progress)
        fits[key] = {"train_rows": float(len(train)), **info}
        scored = np.concatenate([np.concatenate([c.train, c.val, c.test]) for c in members])
        if len(scored):
            scores[scored] = model.predict(x[scored], days[scored])
            if objective.kind == "regression" and np.ptp(scores[scored]) == 0:
                log.warning("%s (%s) scores every row alike (fit: %s): it learned nothing from %d training rows, "
                            "so IC is undefined; its regularization may be too strong for so few rows",
                            name, key, fits[key], len(train))  # fmt: skip
        advance(1)
    return scores, fits


def federated_fit(
    name: str, model: Reference, x: np.ndarray, y: np.ndarray, clients: Sequence[ClientData], scores: np.ndarray
) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    """One round of the one-pass federated ``model``: each client's training and validation moments (its
    rows never leave it), the server's solve on their sums, the one model scoring every client's rows."""
    from fedloom.references.ridge_probe import RidgeProbe

    if not isinstance(model, RidgeProbe):
        raise TypeError(f"{name} has no one-pass federated fit")
    train = [model.moments(Fold(x[c.train], y[c.train])) for c in clients if len(c.train)]
    valid = [model.moments(Fold(x[c.val], y[c.val])) for c in clients if len(c.val)]
    if not train:
        raise ValueError(f"{name} (federated): no client has training rows")
    info = model.fit_moments(train, valid)
    scored = np.concatenate([np.concatenate([c.train, c.val, c.test]) for c in clients])
    if len(scored):
        scores[scored] = model.predict(x[scored])
    rows = float(sum(len(c.train) for c in clients))
    return scores, {"federated": {"train_rows": rows, "clients": float(len(train)), **info}}
