"""One plotting style for every chart in the course.

Charts are small and readable on a laptop screen; every chart says on it
which device and torch version measured it, because the numbers are this
machine's, not a universal truth. A title or axis label a chapter passes in
goes through the catalog too (:func:`_label`): the chapter's English is the
message, so the Korean edition draws it in Korean.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import matplotlib.pyplot as plt
import torch

from helpers.i18n import _

__all__ = ["new_figure", "plot_lanes", "plot_sweep", "stamp"]


def new_figure(ncols: int = 1, width: float = 5.0, height: float = 3.4, **kwargs: Any):
    """A figure with ``ncols`` axes side by side, in the course style."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False, **kwargs)
    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, (axes[0, 0] if ncols == 1 else list(axes.flat))


def stamp(fig, device: Any) -> None:
    """Write the device and torch version in the figure's corner: where the numbers came from."""
    where = _("measured on {device}, torch {version}").format(device=_label(str(device)), version=torch.__version__)
    fig.text(0.99, 0.01, where, ha="right", va="bottom", fontsize=7, alpha=0.6)
    fig.tight_layout()


def plot_sweep(ax, lines: Mapping[Any, Iterable[Any]], x: str, y: str, *, scale: float = 1.0, log: bool = False,
               xlabel: str | None = None, ylabel: str | None = None, title: str = "",
               mark: tuple[float, str] | None = None):
    """Draw ``y`` against the swept ``x`` on ``ax``, one line per entry of ``lines``; returns ``ax``.

    ``lines`` maps a line's label to its measured points, each a dict (a row
    of :class:`helpers.benchmark.Table`) or an object with attributes (a
    :class:`helpers.dataloader.SweepPoint`), read by the field names ``x`` and
    ``y``: every chapter plots the records it already has. Each point gets a
    marker, because only the points were measured, not the line between them.
    ``scale`` multiplies ``y`` (``1e-9`` draws FLOP/s as GFLOP/s); a ``y`` of
    None leaves a gap. ``log`` makes both axes logarithmic, x in powers of two
    (sizes that double). ``mark`` is ``(x, label)``: a dotted vertical line
    there, named in the legend (e.g. the number of cores).
    """
    for label, points in lines.items():
        points = list(points)
        ys = [_field(p, y) for p in points]
        ax.plot([_field(p, x) for p in points], [None if v is None else v * scale for v in ys], marker="o",
                label=str(label))
    if mark is not None:
        ax.axvline(mark[0], color="grey", ls=":", lw=1, label=mark[1])
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
    ax.set(xlabel=_label(xlabel or x), ylabel=_label(ylabel or y), title=_label(title))
    ax.legend(fontsize=8)
    return ax


def plot_lanes(ax, lanes: Mapping[str, Iterable[tuple[float, float]]], *, title: str = "", scale: float = 1e3,
               unit: str = "ms"):
    """A timeline: one row per lane (host, stream...), a bar for each (start, end) of work in it; returns ``ax``.

    Where bars of two lanes stand one above the other, the two ran at the same time; where one lane's bars
    leave gaps, it waited. Times in seconds, drawn in ``unit`` (``scale`` converts).
    """
    names = list(lanes)
    for row, name in enumerate(names):
        spans = [(a * scale, (b - a) * scale) for a, b in lanes[name]]
        ax.broken_barh(spans, (row - 0.35, 0.7), color=f"C{row}")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set(xlabel=_("time ({unit})").format(unit=unit), title=_label(title))
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")
    return ax


def _label(text: str) -> str:
    """A caller's title or label in the current language: its English is the catalog's message.

    The empty string stays empty: gettext's translation of ``""`` is the catalog's header, not a label.
    """
    return _(text) if text else text


def _field(point: Any, name: str) -> Any:
    """``point[name]`` for a dict, ``point.name`` for any other record."""
    return point[name] if isinstance(point, Mapping) else getattr(point, name)
