"""Chapter 04's overlap measurement (section 5), run as far as a machine without a GPU allows.

The cell's CUDA branch times four kinds of work with CUDA events and claims an overlap only when two
streams beat one beyond the noise (issue 23, finding 8). Here a small stand-in for the GPU runs it:
each stream has its own virtual clock, a copy of the pinned buffer costs 3 ms on the clock of the
stream it is queued on, a product 1 ms, `wait_stream` makes one stream wait for the other's clock and
an event reads the clock of the stream it is recorded on. A GPU whose streams run side by side must
be said to overlap; one whose streams share one clock (the work runs one after the other) must not.
Without CUDA the cell must say it skipped, and why.
"""

import contextlib
import io
import types

import pytest

from support.layout import load, solution_path
from helpers import benchmark as bench
from helpers.i18n import tr

COPY_MS, PRODUCT_MS = 3.0, 1.0


def _overlap_cell():
    nb = load(solution_path("04_dataloader"))
    (source,) = [c.source for c in nb.cells if c.cell_type == "code" and "def two_streams(" in c.source]
    return source


class _FakeGpu:
    """Streams with virtual clocks (ms); ``concurrent=False`` gives every stream the same clock."""

    def __init__(self, concurrent):
        self.concurrent = concurrent
        self.default = self.Stream()
        self.current = self.default
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self, stream=None):
                self.t = gpu._clock(stream or gpu.current)

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return other.t - self.t

        self.Event = Event

    def Stream(self, device=None):  # noqa: N802 - torch.cuda.Stream's name; the cell names its device
        gpu = self

        class Stream:
            clock = 0.0

            def wait_stream(self, other):
                gpu._set(self, max(gpu._clock(self), gpu._clock(other)))

        return Stream()

    def _clock(self, stream):
        return stream.clock if self.concurrent else self.default.clock

    def _set(self, stream, t):
        (stream if self.concurrent else self.default).clock = t

    def spend(self, ms):
        self._set(self.current, self._clock(self.current) + ms)

    def is_available(self):
        return True

    def synchronize(self, device=None):
        t = max(self.default.clock, self.current.clock)
        self.default.clock = self.current.clock = t

    def current_stream(self, device=None):
        return self.current

    @contextlib.contextmanager
    def stream(self, s):
        before, self.current = self.current, s
        try:
            yield
        finally:
            self.current = before


class _FakeTensor:
    def __init__(self, gpu):
        self.gpu = gpu

    def pin_memory(self):
        return self

    def to(self, device, non_blocking=False):
        self.gpu.spend(COPY_MS)
        return _FakeTensor(self.gpu)

    def __matmul__(self, other):
        self.gpu.spend(PRODUCT_MS)
        return _FakeTensor(self.gpu)


def _run(cuda):
    fake_torch = types.SimpleNamespace(randn=lambda *shape, **kw: _FakeTensor(cuda), cuda=cuda)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_overlap_cell(), "<cell c25b>", "exec"),  # noqa: S102 - the chapter's own cell
             {"torch": fake_torch, "device": "cuda", "bench": bench, "tr": tr})  # tr: the opening cell's import
    return out.getvalue()


@pytest.mark.parametrize("concurrent", [True, False], ids=["streams-side-by-side", "streams-one-after-the-other"])
def test_overlap_is_claimed_only_when_two_streams_beat_one_beyond_the_noise(concurrent):
    printed = _run(_FakeGpu(concurrent))
    assert "3 products alone" in printed  # the products sized to last about as long as the copy
    for label in ("copy alone", "copy, then products (one stream)", "copy beside products (two streams)"):
        assert f"{label}: " in printed
    assert "15 repeats" in printed
    if concurrent:
        assert "the copy overlapped the compute: two streams saved 3.00 ms of the 6.00 ms" in printed
    else:
        assert "the copy overlapped" not in printed and "no overlap beyond the noise here" in printed


def test_without_cuda_the_overlap_cell_says_it_skipped_and_why():
    printed = _run(types.SimpleNamespace(is_available=lambda: False))
    assert printed.startswith("skipped: no CUDA GPU here") and "copy engine" in printed
