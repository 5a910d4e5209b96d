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
    matrix = np.array([routes[c] for c in clients])
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * matrix.shape[1], 1.0 + 0.32 * len(clients)))
    image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(matrix.shape[1]), [f"P{m}" for m in range(matrix.shape[1])])
    ax.set_yticks(range(len(clients)), [f"{c} ({labels[c]})" if labels.get(c, c) != c else c for c in clients])
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if matrix[i, j] < 0.6 else "black")  # fmt: skip
    ax.set_xlabel("prototype")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, label="route weight π")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def task_expert_heatmap(routing: Mapping[str, object], path: Path, title: str) -> None:
    """Tasks × experts mean routing weights (rows normalized)."""
    matrix = np.asarray(routing["matrix"])
    tasks = list(routing["tasks"])  # type: ignore[arg-type]
    fig, ax = plt.subplots(figsize=(1.5 + 0.6 * matrix.shape[1], 1.0 + 0.4 * len(tasks)))
    image = ax.imshow(matrix, cmap="magma", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(matrix.shape[1]), [f"E{m}" for m in range(matrix.shape[1])])
    ax.set_yticks(range(len(tasks)), tasks)
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if matrix[i, j] < 0.6 else "black")  # fmt: skip
    ax.set_xlabel("expert")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, label="mean routing weight")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
