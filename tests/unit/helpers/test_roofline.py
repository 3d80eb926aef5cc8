"""helpers.roofline: the two roofs and their ridge, a step's operations placed by FLOPs and bytes, the plot."""

import io
import logging
import math
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from helpers import i18n, roofline  # noqa: E402
from helpers.roofline import OpPoint, Roof  # noqa: E402


def test_the_ridge_is_peak_over_bandwidth_and_the_roof_is_the_lower_of_the_two():
    roof = Roof(peak_flops=100e12, bandwidth=2e12, label="a GPU")
    assert roof.ridge == pytest.approx(50.0)
    assert roof.attainable(10.0) == pytest.approx(20e12)  # below the ridge: intensity times bandwidth
    assert roof.attainable(50.0) == pytest.approx(100e12)
    assert roof.attainable(400.0) == pytest.approx(100e12)  # above it: the peak, however intense


@pytest.mark.parametrize("intensity, bound", [(0.25, "memory"), (49.999, "memory"), (50.0, "compute"),
                                              (1e4, "compute")])
def test_bound_is_memory_below_the_ridge_and_compute_at_or_above_it(intensity, bound):
    assert Roof(100e12, 2e12).bound(intensity) == bound


@pytest.mark.parametrize("peak, bandwidth", [(0.0, 1e9), (1e12, 0.0), (1e12, math.inf), (-1.0, 1e9)])
def test_a_roof_without_two_positive_roofs_is_refused(peak, bandwidth):
    with pytest.raises(ValueError, match="above 0"):
        Roof(peak, bandwidth)


def test_a_linears_matmul_counts_as_flopcountermode_counts_it_and_its_bytes_from_its_sizes():
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(32, 16), torch.randn(8, 32)
    points = {p.name: p for p in roofline.op_points(layer, x)}
    with FlopCounterMode(display=False) as counter:
        layer(x)
    addmm = points["aten.addmm"]
    assert addmm.flops == counter.get_total_flops() == 2 * 8 * 32 * 16
    # inputs: bias (16), x (8x32), the weight seen transposed (32x16); output 8x16; float32
    assert addmm.bytes == 4 * (16 + 8 * 32 + 32 * 16 + 8 * 16)
    assert addmm.intensity == pytest.approx(addmm.flops / addmm.bytes)
    assert points["aten.t"].flops == 0 and points["aten.t"].bytes == 0  # a view moves nothing


def test_a_step_counts_elementwise_work_per_element_and_groups_calls_of_one_operation():
    layer, x, y = torch.nn.Linear(32, 16), torch.randn(8, 32), torch.randint(0, 16, (8,))

    def step():
        F.cross_entropy(layer(x), y).backward()

    with FlopCounterMode(display=False) as counter:
        step()
    layer.zero_grad(set_to_none=True)
    grouped = roofline.op_points(step)
    layer.zero_grad(set_to_none=True)
    each = roofline.op_points(step, grouped=False)
    assert sum(p.flops for p in grouped if p.name in ("aten.addmm", "aten.mm")) == counter.get_total_flops()
    assert len({p.name for p in grouped}) == len(grouped) and len(each) > len(grouped)
    assert sum(p.calls for p in grouped) == len(each)
    assert sum(p.flops for p in grouped) == sum(p.flops for p in each)
    log_softmax = next(p for p in grouped if p.name == "aten._log_softmax")
    assert log_softmax.flops == 8 * 16  # one FLOP per element
    assert next(p for p in grouped if p.name == "aten.sum").flops == 8 * 16  # a reduction: one per input element


def test_an_in_place_add_reads_and_writes_its_tensor_and_a_repeated_input_is_read_once():
    a = torch.ones(100)
    (point,) = roofline.op_points(lambda: a.add_(a))
    assert point.name == "aten.add_" and point.flops == 100
    assert point.bytes == 2 * 400  # a read once on the way in, written once on the way out


@pytest.mark.filterwarnings("ignore::helpers.benchmark.NoisyTimingWarning")  # tiny and short: spread is no matter
@pytest.mark.parametrize("op, tensors", [("copy", 2), ("add", 3)])
def test_measure_bandwidth_counts_the_bytes_each_op_moves_and_gives_positive_rates(op, tensors):
    bw = roofline.measure_bandwidth("cpu", nbytes=64 * 1024, op=op, min_run_time=0.01)
    assert bw.op == op and bw.bytes_moved == tensors * 64 * 1024
    assert bw.timing.nbytes == bw.bytes_moved and bw.timing.device == "cpu"
    assert bw.bytes_per_s == pytest.approx(bw.bytes_moved / bw.timing.median)
    assert 0 < bw.low <= bw.bytes_per_s <= bw.high


def test_measure_bandwidth_refuses_an_op_it_does_not_know():
    with pytest.raises(ValueError, match="copy, add"):
        roofline.measure_bandwidth("cpu", nbytes=1024, op="scale")


def _points():
    return [OpPoint("aten.mm", flops=2 * 64**3, bytes=3 * 4 * 64**2), OpPoint("aten.add", flops=100, bytes=1200),
            OpPoint("aten.view", flops=0, bytes=0), OpPoint("aten.relu", 100, 800, flops_per_s=1e6)]


def test_plot_draws_both_roofs_the_ridge_and_each_point_at_its_place():
    roof = Roof(1e12, 1e11, label="test")
    ax = roofline.plot(roof, _points(), title="A roofline")
    memory, compute, ridge = ax.get_lines()
    assert memory.get_ydata()[-1] == pytest.approx(1e12) and memory.get_xdata()[-1] == pytest.approx(roof.ridge)
    assert list(compute.get_ydata()) == [1e12, 1e12]
    assert list(ridge.get_xdata()) == [roof.ridge, roof.ridge]
    placed = [tuple(c.get_offsets()[0]) for c in ax.collections]
    assert len(placed) == 3  # the view computes nothing: no place on a log axis
    mm, add, relu = _points()[0], _points()[1], _points()[3]
    assert placed[0] == pytest.approx((mm.intensity, roof.attainable(mm.intensity)))
    assert placed[1] == pytest.approx((add.intensity, roof.attainable(add.intensity)))
    assert placed[2] == pytest.approx((relu.intensity, 1e6))  # a measured rate, where one was given
    assert [t.get_text() for t in ax.texts] == ["mm", "add", "relu"]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_title() == "A roofline"
    plt.close(ax.figure)


@pytest.fixture
def korean():
    pytest.importorskip("koreanize_matplotlib")
    chosen = i18n._chosen
    with matplotlib.rc_context():
        i18n.use("ko")
        yield
    i18n._chosen = chosen


@pytest.fixture
def english():
    chosen = i18n._chosen
    with matplotlib.rc_context({k: v for k, v in matplotlib.rcParamsDefault.items() if k != "backend"}):
        i18n.use("en")
        yield
    i18n._chosen = chosen


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_plot_draws_without_a_warning_or_a_missing_glyph(language, request, caplog):
    if language == "ko":
        request.getfixturevalue("korean")
    else:  # matplotlib's own defaults, whatever an earlier test in this process left (koreanize sets rcParams)
        request.getfixturevalue("english")
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="matplotlib"):
        warnings.simplefilter("always")
        ax = roofline.plot(Roof(1e12, 1e11, label="cpu"), _points())
        ax.figure.savefig(io.BytesIO(), format="png", dpi=57 if language == "ko" else 53)
        plt.close(ax.figure)
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in caplog.records if "glyph" in r.getMessage().lower()] == []
