"""Figures of a run directory, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from fedloom.algorithms.base import Heatmap


def draw_heatmap(heatmap: Heatmap, path: Path, title: str) -> None:
    """An annotated [0, 1] heatmap a method declared (`RunReport.heatmaps`), saved to ``path``."""
    matrix = np.asarray(heatmap.matrix, dtype=float)
    rows, cols = matrix.shape
    fig, ax = plt.subplots(figsize=(1.3 + 0.6 * cols, 1.0 + 0.35 * rows))
    image = ax.imshow(matrix, cmap=heatmap.cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(cols), [f"{heatmap.column_prefix}{m}" for m in range(cols)])
    ax.set_yticks(range(rows), list(heatmap.rows))
    for i in range(rows):
        for j in range(cols):
            ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if matrix[i, j] < 0.6 else "black")  # fmt: skip
    ax.set_xlabel(heatmap.column_label)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, label=heatmap.value_label)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
