"""Train a reference pooled (one model on every client's rows: the centralized, non-private yardstick)
or local-only (one model per client on its own rows), and score every validation and test row."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from fedloom.data.schema import ClientData
from fedloom.progress import Progress, SilentProgress
from fedloom.references.base import Fold, Objective
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
    """Scores of every client's validation and test rows (NaN elsewhere) and what each fit chose,
    keyed ``pooled`` or by client; ``features`` names the columns of ``x``, ``days`` dates its rows.
    ``progress`` hears of each fit and, from the neural references, of each validation check."""
    scores = np.full(len(y), np.nan, dtype=np.float32)
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
        scored = np.concatenate([np.concatenate([c.val, c.test]) for c in members])
        if len(scored):
            scores[scored] = model.predict(x[scored], days[scored])
            if objective.kind == "regression" and np.ptp(scores[scored]) == 0:
                log.warning("%s (%s) scores every row alike (fit: %s): it learned nothing from %d training rows, "
                            "so IC is undefined; its regularization may be too strong for so few rows",
                            name, key, fits[key], len(train))  # fmt: skip
        advance(1)
    return scores, fits
