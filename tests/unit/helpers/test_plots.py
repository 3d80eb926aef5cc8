"""helpers.plots: figures in the course style, stamped with where the numbers came from."""

import matplotlib

matplotlib.use("Agg")

import dataclasses  # noqa: E402

import torch  # noqa: E402

from helpers.plots import new_figure, plot_sweep, stamp  # noqa: E402


def test_new_figure_and_stamp():
    fig, ax = new_figure()
    ax.plot([1, 2], [3, 4])
    stamp(fig, torch.device("cpu"))
    texts = [t.get_text() for t in fig.texts]
    assert any("measured on cpu" in t and torch.__version__ in t for t in texts)
    fig2, axes = new_figure(ncols=2)
    assert len(axes) == 2


@dataclasses.dataclass
class _Point:
    workers: int
    seconds: float | None


def test_plot_sweep_draws_each_record_kind_scaled_with_its_labels():
    """Dict rows and attribute records plot alike; ``scale`` converts units, ``mark`` joins the legend."""
    _, ax = new_figure()
    lines = {"rows": [{"workers": 1, "seconds": 0.002}, {"workers": 2, "seconds": 0.001}],
             "records": [_Point(1, 0.004), _Point(2, None)]}
    plot_sweep(ax, lines, "workers", "seconds", scale=1e3, ylabel="ms", title="start-up", mark=(2, "2 cores"))
    rows, records, cores = ax.get_lines()
    assert list(rows.get_xdata()) == [1, 2] and list(rows.get_ydata()) == [2.0, 1.0]
    assert records.get_ydata()[0] == 4.0 and records.get_ydata()[1] is None  # a gap where nothing was measured
    assert list(cores.get_xdata()) == [2, 2]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["rows", "records", "2 cores"]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("workers", "ms", "start-up")
    assert ax.get_xscale() == ax.get_yscale() == "linear"
