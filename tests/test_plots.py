"""helpers.plots: figures in the course style, stamped with where the numbers came from."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

from helpers.plots import new_figure, stamp  # noqa: E402


def test_new_figure_and_stamp():
    fig, ax = new_figure()
    ax.plot([1, 2], [3, 4])
    stamp(fig, torch.device("cpu"))
    texts = [t.get_text() for t in fig.texts]
    assert any("measured on cpu" in t and torch.__version__ in t for t in texts)
    fig2, axes = new_figure(ncols=2)
    assert len(axes) == 2
