"""Figures of a run directory, drawn with matplotlib's Agg backend (no display needed): the shared
heatmap drawing and saving a figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fedloom.algorithms.base import Heatmap

# 20 distinct line colours: tab10's, then tab20's lighter partners (a suite table has 11+ rows; the
# default cycle repeats after 10, and two rows would share a colour)
_TAB20 = [matplotlib.colormaps["tab20"](i) for i in range(20)]
plt.rcParams["axes.prop_cycle"] = cycler(color=[*_TAB20[0::2], *_TAB20[1::2]])


def heatmap_on(ax: Axes, heatmap: Heatmap, annotate: bool = True) -> matplotlib.image.AxesImage:
    """Draw a [0, 1] heatmap a method declared (`RunReport.heatmaps`) on ``ax``; returns the image."""
    matrix = np.asarray(heatmap.matrix, dtype=float)
    rows, cols = matrix.shape
    image = ax.imshow(matrix, cmap=heatmap.cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(cols), [f"{heatmap.column_prefix}{m}" for m in range(cols)])
    ax.set_yticks(range(rows), list(heatmap.rows))
    if annotate:
        for i in range(rows):
            for j in range(cols):
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if matrix[i, j] < 0.6 else "black")  # fmt: skip
    ax.set_xlabel(heatmap.column_label)
    return image


def heatmap_figure(heatmap: Heatmap, title: str) -> Figure:
    """One annotated heatmap with its colour bar."""
    rows, cols = np.asarray(heatmap.matrix, dtype=float).shape
    fig, ax = plt.subplots(figsize=(1.3 + 0.6 * cols, 1.0 + 0.35 * rows))
    image = heatmap_on(ax, heatmap)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, label=heatmap.value_label)
    fig.tight_layout()
    return fig


def heatmaps_figure(heatmaps: Sequence[Heatmap]) -> Figure:
    """Several heatmaps of one shape side by side (e.g. routes at several rounds), one colour bar."""
    rows, cols = np.asarray(heatmaps[0].matrix, dtype=float).shape
    fig, axes = plt.subplots(1, len(heatmaps), figsize=(1.5 + (0.6 * cols + 0.8) * len(heatmaps), 1.2 + 0.35 * rows),
                             squeeze=False, sharey=True)  # fmt: skip
    image = None
    for ax, heatmap in zip(axes[0], heatmaps, strict=True):
        image = heatmap_on(ax, heatmap, annotate=rows * cols <= 120)
        ax.set_title(heatmap.title, fontsize=9)
    assert image is not None
    fig.colorbar(image, ax=list(axes[0]), fraction=0.05, label=heatmaps[0].value_label)
    return fig


def save_figure(fig: Figure, path: Path, dpi: int = 120) -> None:
    """Write ``fig`` as a PNG and release it."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def draw_heatmap(heatmap: Heatmap, path: Path, title: str) -> None:
    """An annotated heatmap a method declared, saved to ``path``."""
    save_figure(heatmap_figure(heatmap, title), path)
