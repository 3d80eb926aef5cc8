"""helpers.benchmark's one rule for conclusions from measurements: compare, Conclusion, leaders, report.

The property tests say what the rule promises for *any* measured numbers: a
printed conclusion never contradicts the figures it came from (it never calls the
work with the larger median faster, never declares a difference whose bands
overlap, never prints "1.00x faster"), and it does not depend on the order of
the two sides or on the unit of time. The example tests pin the sentences the
chapters print, and the readings that once produced a wrong conclusion.
"""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import benchmark as bench
from helpers.checks.fakes.simulated_gpu import SimulatedDevice

# seconds per repeat, from a microsecond to a quarter of an hour: any time a chapter measures
seconds = st.floats(min_value=1e-6, max_value=1e3, allow_nan=False, allow_infinity=False)
repeats = st.lists(seconds, min_size=1, max_size=12)


def timing(times, label, threads=2):
    return bench.Timing.from_times(times, label=label, num_threads=threads)


def band(t):
    half = max(t.iqr, bench.MIN_SPREAD * t.median) / 2
    return t.median - half, t.median + half


def printed_ratio(text):
    """The ratio a sentence prints: "A is 1.83x faster than B (...)" -> 1.83."""
    return float(re.search(r"(?:is|takes) ([0-9.]+)x (?:faster|as long)", text).group(1))


# --------------------------------------------------------------------------- properties


@settings(max_examples=400, deadline=None)
@given(repeats, repeats)
def test_a_verdict_never_contradicts_its_own_numbers(times_a, times_b):
    a, b = timing(times_a, "A"), timing(times_b, "B")
    verdict = bench.compare(a, b)
    text = str(verdict)
    assert "A" in text and "B" in text
    if verdict.clear:
        fast, slow = verdict.faster, verdict.slower
        assert fast.median < slow.median  # never "A faster" when A's median is not smaller
        assert band(fast)[1] < band(slow)[0]  # the bands do not overlap
        assert text.startswith(f"{fast.label} is ") and f"faster than {slow.label}" in text
        assert printed_ratio(text) > 1  # never "1.00x faster"
        assert "noise" not in text and "no conclusion" not in text
    else:
        assert "no conclusion" in text and "faster than" not in text
        if verdict.known:
            assert "within the noise on this machine" in text
            assert band(a)[1] >= band(b)[0] and band(b)[1] >= band(a)[0]  # the bands overlap


@settings(max_examples=300, deadline=None)
@given(repeats, repeats)
def test_the_speedup_lies_in_its_interval_and_the_interval_decides(times_a, times_b):
    verdict = bench.compare(timing(times_a, "A"), timing(times_b, "B"))
    if not verdict.known:
        assert not verdict.clear
        return
    assert verdict.low <= verdict.speedup <= verdict.high
    assert (verdict.faster is verdict.a) == (verdict.low > 1)
    assert (verdict.faster is verdict.b) == (verdict.high < 1)


@settings(max_examples=300, deadline=None)
@given(repeats, repeats)
def test_the_verdict_does_not_depend_on_the_order_of_the_sides(times_a, times_b):
    a, b = timing(times_a, "A"), timing(times_b, "B")
    forward, backward = bench.compare(a, b), bench.compare(b, a)
    assert forward.clear == backward.clear
    assert forward.faster is backward.faster
    if forward.clear:
        assert forward.sentence() == backward.sentence()


@settings(max_examples=200, deadline=None)
@given(repeats, repeats, st.integers(min_value=-20, max_value=20))
def test_the_verdict_does_not_depend_on_the_unit_of_time(times_a, times_b, power):
    scale = 2.0**power  # exact in floating point: the same numbers in another unit
    plain = bench.compare(timing(times_a, "A"), timing(times_b, "B"))
    scaled = bench.compare(timing([t * scale for t in times_a], "A"), timing([t * scale for t in times_b], "B"))
    assert (plain.faster and plain.faster.label) == (scaled.faster and scaled.faster.label)


@settings(max_examples=200, deadline=None)
@given(st.lists(seconds, min_size=1, max_size=bench.MIN_BLOCKS - 1), repeats)
def test_too_few_repeats_never_give_a_conclusion(few, times):
    verdict = bench.compare(timing(few, "A"), timing(times, "B"))
    assert not verdict.clear and "too few repeats" in str(verdict)


@settings(max_examples=200, deadline=None)
@given(st.lists(repeats, min_size=1, max_size=6), st.booleans())
def test_leaders_hold_the_extreme_and_only_what_cannot_be_told_from_it(all_times, slowest):
    timings = [timing(times, f"T{i}") for i, times in enumerate(all_times)]
    top = bench.leaders(timings, slowest=slowest)
    extreme = (max if slowest else min)(t.median for t in timings)
    first = top[0]
    assert first.median == extreme
    assert [t.median for t in top] == sorted((t.median for t in top), reverse=slowest)
    for t in timings:
        if t not in top:  # left out only when the rule says it is beyond the noise from the leader
            verdict = bench.compare(first, t)
            assert verdict.clear and verdict.faster is (t if slowest else first)


@settings(max_examples=200, deadline=None)
@given(repeats, repeats, repeats, repeats)
def test_one_speedup_exceeds_another_only_when_its_interval_is_above(t1, t2, t3, t4):
    one = bench.compare(timing(t1, "A"), timing(t2, "B"))
    other = bench.compare(timing(t3, "C"), timing(t4, "D"))
    if one.exceeds(other):
        assert one.speedup > other.speedup and one.low > other.high
        assert not other.exceeds(one)


# --------------------------------------------------------------------------- examples


def test_a_clear_difference_is_stated_with_its_interval():
    fast = timing([1.0, 1.02, 0.98, 1.01, 0.99], "2 workers")
    slow = timing([2.0, 2.1, 1.9, 2.05, 1.95], "0 workers")
    verdict = bench.compare(fast, slow)
    assert verdict.clear and verdict.faster is fast and verdict.slower is slow
    assert str(verdict) == "2 workers is 2.00x faster than 0 workers (1.81x to 2.21x, from their spreads)"
    assert verdict.sentence(longer=True).startswith("0 workers takes 2.00x as long as 2 workers")


def test_a_steady_but_small_difference_is_within_the_noise():
    """The floor: a 5 % gap between two very steady measurements is not declared (the load changes between them)."""
    a = timing([1.00, 1.00, 1.00, 1.00], "one process")
    b = timing([1.05, 1.05, 1.05, 1.05], "two processes")
    verdict = bench.compare(a, b)
    assert not verdict.clear and a.iqr == 0 and b.iqr == 0
    assert str(verdict) == ("one process and two processes are within the noise on this machine (1.05x apart, but "
                            "their spreads overlap): no conclusion")
    assert bench.compare(a, timing([1.2] * 4, "slower")).clear  # 20 % apart: beyond the floor


def test_the_readings_that_once_named_a_wrong_best_are_a_tie():
    """Chapter 04 once called one noisy reading "the best" and 8 workers "23 % below" it; repeated, they tie."""
    two = timing([0.14, 0.21, 0.26], "2 workers")
    eight = timing([0.16, 0.19, 0.22], "8 workers")
    assert [t.label for t in bench.leaders([two, eight])] == ["8 workers", "2 workers"]
    assert "within the noise" in str(bench.compare(two, eight))
    once = timing([0.15], "2 workers, once")
    assert "too few repeats" in str(bench.compare(once, eight))


def test_unequal_threads_are_named_in_the_sentence():
    one = timing([1.0, 1.0, 1.0], "1 process", threads=1)
    two = timing([0.5, 0.5, 0.5], "2 processes", threads=2)
    assert str(bench.compare(two, one)).endswith("[not like with like: 2 torch threads in all against 1]")
    assert "like with like" not in str(bench.compare(two, timing([1.0] * 3, "1 process, 2 threads")))
    assert "like with like" not in str(bench.compare(two, one, threads_compared=True))  # the threads are the question


def test_unlabelled_and_degenerate_measurements_still_read():
    verdict = bench.compare(timing([1.0] * 3, ""), timing([3.0] * 3, ""))
    assert str(verdict).startswith("one is 3.00x faster than the other")
    zero = bench.compare(timing([0.0] * 3, "nothing"), timing([1.0] * 3, "work"))
    assert not zero.clear and "not a positive time" in str(zero)
    wide = bench.compare(timing([1.0, 1.0, 9.0, 9.0], "wide"), timing([30.0] * 4, "slow"))
    assert wide.clear and math.isinf(wide.high) is False and "from their spreads" in str(wide)


def test_a_timing_from_the_course_timer_is_judged_by_the_same_rule():
    cpu = SimulatedDevice("cpu")
    with cpu.active():
        quick = bench.time_callable(cpu.kernel(0.001), "cpu", min_run_time=0.05, label="quick", warn=False)
        slow = bench.time_callable(cpu.kernel(0.003), "cpu", min_run_time=0.05, label="slow", warn=False)
    assert quick.measurement is not None
    verdict = bench.compare(quick, slow)
    assert verdict.faster is quick and printed_ratio(str(verdict)) == pytest.approx(3.0, abs=0.01)


def test_report_shows_each_figure_with_its_spread():
    text = bench.report([timing([1e-3, 1.1e-3, 0.9e-3], "a"), timing([2e-3], "b", threads=1)])
    assert text.splitlines() == ["  a: 1 ms (IQR 10% of the median, 3 repeats, 2 threads)",
                                 "  b: 2 ms (too few blocks to know its spread, 1 repeat, 1 thread)"]


def test_describe_leader_names_a_leader_only_beyond_the_noise():
    data = timing([0.080, 0.082, 0.079, 0.081], "data")
    backward = timing([0.004, 0.030, 0.003, 0.025, 0.005], "backward")
    forward = timing([0.001, 0.0011, 0.0009], "forward")
    assert bench.describe_leader([forward, data, backward], "slowest region", slowest=True) == (
        "the slowest region is data: data takes 16.1x as long as backward (at least 4.93x, from their spreads)")
    assert bench.describe_leader([data, backward, forward], "fastest region").startswith(
        "no single fastest region: forward and backward are within the noise on this machine")
    assert bench.describe_leader([data], "slowest region") == "the slowest region is data, the only one measured"
    one, two = timing([2.0, 2.0, 2.0], "1 thread", threads=1), timing([1.0, 1.0, 1.0], "2 threads")
    assert bench.describe_leader([one, two], "fastest").endswith("[not like with like: 2 torch threads in all against 1]")
    assert bench.describe_leader([one, two], "fastest", threads_compared=True).endswith("from their spreads)")
    never = timing([float("nan")], "never ran")
    assert bench.leaders([never, data, forward], slowest=True) == [data]  # no median: no part in the ranking
    assert bench.describe_leader([never, data], "slowest region").endswith("the only one measured")


def test_leaders_needs_a_measurement():
    with pytest.raises(ValueError, match="at least one"):
        bench.leaders([])
    with pytest.raises(ValueError, match="with a median"):
        bench.leaders([timing([float("nan")], "never ran")])


def test_a_crossover_from_verdicts_is_claimed_only_beyond_the_noise():
    """Chapter 01's sweep: the accelerator wins from a size on only where each verdict says so beyond the noise."""
    def at(accelerator_s, cpu_s):
        return bench.compare(timing([accelerator_s * f for f in (0.98, 1.0, 1.02)], "cuda:0"),
                             timing([cpu_s * f for f in (0.98, 1.0, 1.02)], "cpu"))

    sizes = [16, 256, 1024, 2048]
    wins = [at(2.0, 1.0), at(1.0, 2.0), at(1.0, 5.0), at(1.0, 40.0)]
    assert bench.crossover(sizes, wins) == 256
    tied_at_256 = [wins[0], at(1.0, 1.05), wins[2], wins[3]]  # 1.05x on the medians: within the noise
    assert bench.crossover(sizes, tied_at_256) == 1024
    assert bench.crossover(sizes, [v.speedup for v in tied_at_256]) == 256  # the medians alone would claim 256
    assert bench.crossover(sizes, [*wins[:3], at(1.0, 1.05)]) is None  # not beyond the noise at the largest size
    few = bench.compare(timing([1.0], "cuda:0"), timing([40.0] * 3, "cpu"))
    assert bench.crossover(sizes, [*wins[:3], few]) is None  # too few repeats: no conclusion, so no crossover


def test_verdicts_by_size_compares_the_two_devices_of_a_sweep_size_by_size():
    rows = bench.Table()
    for device, seconds in (("cpu", {64: 1e-4, 512: 8e-3}), ("cuda:0", {64: 1e-4, 512: 2e-4})):
        for n, s in seconds.items():
            row = timing([s * f for f in (0.99, 1.0, 1.01)], "matmul").as_row()
            row.update(device=device, size=n)
            rows.append(row)
    verdicts = bench.verdicts_by_size(rows, "cuda:0", "cpu")
    assert list(verdicts) == [64, 512]
    assert "cuda:0 and cpu are within the noise on this machine" in str(verdicts[64])
    assert str(verdicts[512]).startswith("cuda:0 is 40.0x faster than cpu (")
    assert verdicts[512].speedup == pytest.approx(40.0)
    assert bench.crossover([64, 512], list(verdicts.values())) == 512
    assert {r["timing"].label for r in rows} == {"matmul"}  # the table's own timings keep their labels


def test_a_timing_from_torchs_own_timer_keeps_its_threads_and_its_confidence():
    import torch
    import torch.utils.benchmark as tbench

    a = torch.randn(16, 16)
    m = tbench.Timer("a @ a", globals={"a": a}).blocked_autorange(min_run_time=0.01)
    t = bench.Timing.from_measurement(m, "cpu", label="Timer's default")
    assert t.num_threads == 1 and t.median == m.median and t.times == list(m.times) and t.measurement is m
    assert t.meets_confidence() == (len(m.times) >= bench.MIN_BLOCKS and m.meets_confidence(bench.NOISE_THRESHOLD))
    assert bench.Timing.from_measurement(m, "cpu", num_threads=4, flops=2.0).num_threads == 4
