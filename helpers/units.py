"""How the course writes a measured quantity: one formatter per kind of unit.

The chapters, the benchmark and memory tools and the stored GPU results (``helpers.results``) all print
numbers through these, so a time, a rate or a size reads the same everywhere. Ground floor: no torch.
"""

from __future__ import annotations

import math

from helpers.i18n import _


def format_seconds(seconds: float | None) -> str:
    """``0.0123`` -> ``"12.3 ms"``: the unit a reader takes in at a glance."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_rate(per_second: float | None, unit: str = "FLOP/s") -> str:
    """``9.5e10`` -> ``"95 GFLOP/s"`` (or ``"GB/s"`` with ``unit="B/s"``)."""
    if per_second is None or not math.isfinite(per_second):
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(per_second) >= scale:
            return f"{per_second / scale:.3g} {prefix}{unit}"
    return f"{per_second:.3g} {unit}"


def format_bytes(n: float | None) -> str:
    """``1536`` -> ``'1.50 KiB'``: binary units, as ``torch.cuda.memory_summary`` prints them."""
    if n is None:
        return _("n/a")
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
