"""Figures of a run directory, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np


def route_heatmap(routes: Mapping[str, Sequence[float]], labels: Mapping[str, str], path: Path, title: str) -> None:
    """Clients × prototypes heatmap of final routes, rows sorted by dominant prototype, labelled by group."""
    clients = sorted(routes, key=lambda c: (int(np.argmax(routes[c])), -max(routes[c]), c))
    rows = [f"{c} ({labels[c]})" if labels.get(c, c) != c else c for c in clients]
    matrix = np.array([routes[c] for c in clients])
    _heatmap(matrix, rows, ("P", "prototype"), "viridis", "route weight π", 1.2, 0.32, title, path)


def task_expert_heatmap(routing: Mapping[str, object], path: Path, title: str) -> None:
    """Tasks × experts mean routing weights (rows normalized)."""
    tasks = list(routing["tasks"])  # type: ignore[arg-type]
    matrix = np.asarray(routing["matrix"])
    _heatmap(matrix, tasks, ("E", "expert"), "magma", "mean routing weight", 1.5, 0.4, title, path)


def _heatmap(
    matrix: np.ndarray,
    rows: Sequence[str],
    columns: tuple[str, str],
    cmap: str,
    label: str,
    width: float,
    row_height: float,
    title: str,
    path: Path,
) -> None:
    """An annotated [0, 1] heatmap saved to ``path``; ``columns`` = (tick prefix, axis label)."""
    prefix, xlabel = columns
    fig, ax = plt.subplots(figsize=(width + 0.6 * matrix.shape[1], 1.0 + row_height * len(rows)))
    image = ax.imshow(matrix, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(matrix.shape[1]), [f"{prefix}{m}" for m in range(matrix.shape[1])])
    ax.set_yticks(range(len(rows)), rows)
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if matrix[i, j] < 0.6 else "black")  # fmt: skip
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, label=label)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
