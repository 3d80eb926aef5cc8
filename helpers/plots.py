"""One plotting style for every chart in the course.

Charts are small and readable on a laptop screen; every chart says on it
which device and torch version measured it, because the numbers are this
machine's, not a universal truth.
"""

from __future__ import annotations

from typing import Any



import matplotlib.pyplot as plt
import torch

__all__ = ["new_figure", "stamp"]


def new_figure(ncols: int = 1, width: float = 5.0, height: float = 3.4, **kwargs: Any):
    """A figure with ``ncols`` axes side by side, in the course style."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False, **kwargs)
    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, (axes[0, 0] if ncols == 1 else list(axes.flat))


def stamp(fig, device: Any) -> None:
    """Write the device and torch version in the figure's corner: where the numbers came from."""
    fig.text(0.99, 0.01, f"measured on {device}, torch {torch.__version__}", ha="right", va="bottom",
             fontsize=7, alpha=0.6)
    fig.tight_layout()
