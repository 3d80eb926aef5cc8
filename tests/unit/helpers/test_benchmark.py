"""helpers.benchmark: correct timing on any device, sweeps, tables, and the background queue chapter 01 teaches with.

Behaviour only, never speed: where a result depends on time, the work runs on
chapter 01's simulated device (:class:`helpers.checks.fakes.simulated_gpu.SimulatedDevice`, a
virtual clock), so what is asserted (synchronisation, warm-up, medians) does
not depend on how busy the machine is. The stand-in itself is tested in
tests/unit/checks/test_checks_ch01.py.
"""

import dataclasses
import threading
import timeit
import warnings

import pytest
import torch

from helpers import benchmark as bench
from helpers import device as dev
from helpers.checks import cpu_only_machine
from helpers.checks.fakes.simulated_gpu import SimulatedDevice


def test_time_callable_reports_a_timing_with_throughput():
    a = torch.randn(32, 32)
    t = bench.time_callable(lambda: a @ a, "cpu", min_run_time=0.01, flops=2 * 32**3, nbytes=3 * 32 * 32 * 4, label="mm",
                            warn=False)
    assert isinstance(t, bench.Timing)
    assert t.median > 0 and t.iqr >= 0 and t.times and all(x > 0 for x in t.times)
    assert t.device == "cpu" and t.label == "mm"
    assert t.flops_per_s == pytest.approx(2 * 32**3 / t.median)
    assert t.bytes_per_s == pytest.approx(3 * 32 * 32 * 4 / t.median)
    assert "mm" in str(t) and "FLOP/s" in str(t)
    plain = bench.time_callable(lambda: a @ a, "cpu", min_run_time=0.01, warn=False)
    assert plain.flops_per_s is None and plain.bytes_per_s is None


def test_threads_default_to_torchs_and_are_restored():
    seen = []
    before = torch.get_num_threads()
    t = bench.time_callable(lambda: seen.append(torch.get_num_threads()), "cpu", min_run_time=0.001)
    assert t.num_threads == before and set(seen) == {before}
    seen.clear()
    t1 = bench.time_callable(lambda: seen.append(torch.get_num_threads()), "cpu", min_run_time=0.001, num_threads=1)
    assert t1.num_threads == 1 and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_time_callable_synchronises_an_asynchronous_device_and_warms_up():
    gpu = SimulatedDevice("cuda")
    with gpu.active():
        t = bench.time_callable(gpu.kernel(0.002), gpu.device, warmup=4, min_run_time=0.05)
    assert not any(busy for _, busy in gpu.events("clock")), "a clock was read while work was still queued"
    assert gpu.calls_before_first_clock() >= 4
    assert t.median == pytest.approx(0.002, rel=0.01)  # virtual time: the kernel's duration, not the launch


def test_time_callable_median_ignores_a_slow_call_and_warns_when_noisy():
    cpu = SimulatedDevice("cpu")
    with cpu.active(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a steady measurement must not warn
        t = bench.time_callable(cpu.kernel(lambda i: 0.05 if i == 40 else 0.001), "cpu", min_run_time=0.1)
    assert t.median == pytest.approx(0.001, rel=1e-3)
    cpu = SimulatedDevice("cpu")
    with cpu.active(), pytest.warns(bench.NoisyTimingWarning, match="spread"):
        bench.time_callable(cpu.kernel(lambda i: 0.001 * (1 + i % 3)), "cpu", min_run_time=0.1)


def test_time_callable_repeats_a_call_longer_than_min_run_time_until_its_spread_is_known():
    cpu = SimulatedDevice("cpu")
    with cpu.active():
        t = bench.time_callable(cpu.kernel(0.05), "cpu", min_run_time=0.01, warn=False)
    assert len(t.times) == bench.MIN_BLOCKS and t.number_per_run == 1


def test_time_callable_warns_when_too_few_blocks_show_a_spread():
    """The warning follows the one noise rule: one block of 50 ms, cut short by max_run_time, says nothing."""
    cpu = SimulatedDevice("cpu")
    with cpu.active(), pytest.warns(bench.NoisyTimingWarning, match="too few blocks to know its spread"):
        t = bench.time_callable(cpu.kernel(0.05), "cpu", min_run_time=0.01, max_run_time=0.04)
    assert len(t.times) < bench.MIN_BLOCKS and t.noisy


def test_the_noise_rule_is_torchs_measurement_meets_confidence_over_enough_blocks():
    cpu = SimulatedDevice("cpu")
    with cpu.active():
        t = bench.time_callable(cpu.kernel(lambda i: 0.001 * (1 + i % 3)), "cpu", min_run_time=0.1, warn=False)
    assert isinstance(t.measurement, bench.torch_benchmark.Measurement) and t.measurement.median == t.median
    by_hand = dataclasses.replace(t, measurement=None)  # the same figures, judged from the Timing's own fields
    for threshold in (0.1, 0.9, 1.5):  # IQR / median is about 1 here
        assert t.meets_confidence(threshold) == t.measurement.meets_confidence(threshold)
        assert by_hand.meets_confidence(threshold) == t.meets_confidence(threshold)
    assert t.meets_confidence(1.5) and t.noisy
    edge = bench.Timing(median=1.0, iqr=bench.NOISE_THRESHOLD, times=[1.0] * 5, num_threads=1, device="cpu")
    assert edge.noisy  # torch's rule is strict: a spread of exactly the threshold is not below it
    two = bench.Timing.from_times([1e-3, 1e-3])
    assert two.iqr == 0 and not two.meets_confidence(1.5)  # torch's rule alone would pass two equal blocks


def test_a_tables_rows_follow_the_noise_rule_at_any_threshold():
    wide = bench.Timing.from_times([1e-3, 2e-3, 3e-3, 4e-3, 5e-3], label="wide")  # IQR 2 ms, median 3 ms
    table = bench.Table([wide.as_row(), bench.Timing.from_times([1e-3, 1e-3], label="two").as_row()])
    assert table.noisy().column("label") == ["wide", "two"] and table.best("median") is None
    assert table.noisy(threshold=1.0).column("label") == ["two"]
    assert table.best("median", threshold=1.0)["label"] == "wide"
    assert bench.describe_noisy(table, ["label"]) == ("wide (IQR 67% of the median), "
                                                      "two (too few blocks to know its spread)")


def test_adaptive_repetition_stops_at_max_run_time():
    cpu = SimulatedDevice("cpu")
    with cpu.active():
        t = bench.time_callable(cpu.kernel(lambda i: 0.001 * (1 + i % 5)), "cpu", min_run_time=0.01,
                                max_run_time=0.5, warn=False)
    assert sum(t.times) * t.number_per_run <= 0.6 and len(t.times) > 3


def test_sync_timer_is_the_plain_clock_on_the_cpu_and_synchronises_elsewhere():
    assert bench.sync_timer("cpu") is timeit.default_timer
    gpu = SimulatedDevice("cuda")
    with gpu.active():
        clock = bench.sync_timer(gpu.device)
        start = clock()
        gpu.kernel(0.003)()
        assert clock() - start == pytest.approx(0.003 + gpu.launch_s)  # the work, not only its launch
    assert [e[0] for e in gpu.log] == ["sync", "clock", "call", "sync", "clock"]


def test_the_default_device_follows_the_course_rule(monkeypatch):
    """Explicit, then COURSE_DEVICE, then the best this machine has: the rule helpers.device.pick_device keeps."""
    monkeypatch.setenv(dev.DEVICE_ENV_VAR, "cpu")
    gpu = SimulatedDevice("cuda")
    with gpu.active():
        assert bench.time_callable(gpu.kernel(0.001), min_run_time=0.01).device == "cpu"
        assert bench.time_callable(gpu.kernel(0.001), "cuda", min_run_time=0.01).device == "cuda"
        monkeypatch.delenv(dev.DEVICE_ENV_VAR)
        assert bench.time_callable(gpu.kernel(0.001), min_run_time=0.01).device == "cuda:0"
    monkeypatch.setenv(dev.DEVICE_ENV_VAR, "cuda:7")
    with pytest.raises(dev.DeviceUnavailableError, match="cuda:7"):
        bench.time_callable(lambda: None, min_run_time=0.01)


def test_a_device_the_machine_lacks_is_a_clear_error():
    with cpu_only_machine(), pytest.raises(dev.DeviceUnavailableError, match="Devices available here: cpu"):
        bench.time_callable(lambda: None, "cuda", min_run_time=0.01)


def test_sweep_returns_a_table_with_one_row_per_device_and_size():
    made = []

    def make(n, device):
        made.append((n, device.type))
        x = torch.randn(n, n, device=device)
        return lambda: x @ x

    table = bench.sweep(make, [8, 16], ["cpu"], work=bench.matmul_work, min_run_time=0.005, progress=False)
    assert made == [(8, "cpu"), (16, "cpu")]
    assert isinstance(table, list) and len(table) == 2
    assert {"label", "device", "size", "num_threads", "median", "iqr", "flops_per_s", "bytes_per_s", "timing"} <= set(table[0])
    assert table.where(size=16)[0]["flops_per_s"] == pytest.approx(2 * 16**3 / table[1]["median"])
    assert table.column("size") == [8, 16] and table.values("device") == ["cpu"]
    text = table.format()
    assert "GFLOP/s" in text or "MFLOP/s" in text


def test_a_table_grouped_by_device_plots_one_line_per_device():
    from helpers import plots

    rows = bench.Table([{"device": d, "size": n, "median": 1e-3 * n, "flops_per_s": 1e9 * n}
                        for d in ("cpu", "cuda:0") for n in (8, 16, 32)])
    by_device = rows.group_by("device")
    assert list(by_device) == ["cpu", "cuda:0"] and by_device["cpu"].column("size") == [8, 16, 32]
    ax = plots.plot_sweep(plots.new_figure()[1], by_device, "size", "flops_per_s", log=True)
    assert len(ax.get_lines()) == 2 and ax.get_xscale() == "log" and ax.get_yscale() == "log"


@pytest.mark.parametrize("speedups, expected", [
    ([0.5, 2.0, 0.8, 3.0, 10.0], 4),
    ([2.0, 3.0, 4.0, 5.0, 6.0], 1),
    ([0.1, 0.2, 0.3, 0.4, 1.0], None),
    ([0.1, 0.2, 0.3, 0.4, None], None),
])
def test_crossover_is_where_the_accelerator_wins_from_then_on(speedups, expected):
    assert bench.crossover([1, 2, 3, 4, 5], speedups) == expected


def test_background_queue_returns_before_the_work_is_done():
    release, done = threading.Event(), []
    with bench.BackgroundQueue() as q:
        q.submit(lambda: (release.wait(5), done.append(1)))
        assert done == []  # queued, not done: like a CUDA launch
        release.set()
        q.synchronize()
        assert done == [1]
        q.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            q.synchronize()  # an error in queued work surfaces at the next synchronisation


@pytest.mark.gpu
def test_time_callable_on_cuda_reports_the_device_and_all_threads():
    a = torch.randn(1024, 1024, device="cuda")
    t = bench.time_callable(lambda: a @ a, "cuda", min_run_time=0.05, flops=2 * 1024**3)
    assert t.median > 0 and t.device.startswith("cuda") and t.flops_per_s > 0
    assert t.num_threads == torch.get_num_threads()


def test_compare_with_torch_timer_reports_both_medians_per_round():
    from helpers.benchmark import compare_with_torch_timer

    table = compare_with_torch_timer(n=64, rounds=2, num_threads=1, min_run_time=0.01)
    assert [row["round"] for row in table] == [0, 1]
    for row in table:
        assert row["torch_timer"] > 0 and row["time_callable"] > 0
        assert row["difference"] == (row["time_callable"] - row["torch_timer"]) / row["torch_timer"]


def test_bench_command_explains_itself_and_rejects_bad_sizes(capsys):
    from helpers.__main__ import main

    assert main(["bench", "--help"]) == 0
    assert "--vs-timer" in capsys.readouterr().out
    assert main(["bench", "big"]) == 2
    assert "whole numbers" in capsys.readouterr().err


def _row(label, median, iqr, blocks=5, **extra):
    times = [median] * blocks
    timing = bench.Timing(median=median, iqr=iqr, times=times, num_threads=1, device="cpu", label=label, **extra)
    return dict(timing.as_row(), size=len(label))


def test_best_and_noisy_leave_out_noisy_rows_and_name_them():
    """One noisy point (an IQR seven times its median) must not become the "peak"."""
    table = bench.Table([_row("a", 1e-3, 7e-3, flops=1e9), _row("bb", 2e-3, 1e-4, flops=1e9),
                         _row("ccc", 1e-3, 1e-5, blocks=1, flops=1e9)])
    assert table.best("flops_per_s")["label"] == "bb"  # "a" reports twice the rate, but its spread is 700 %
    assert [r["label"] for r in table.noisy()] == ["a", "ccc"]
    text = bench.describe_noisy(table, ["label"])
    assert "a (IQR 700% of the median)" in text and "ccc (too few blocks to know its spread)" in text
    assert bench.Table([_row("a", 1e-3, 7e-3, flops=1e9)]).best("flops_per_s") is None
    assert bench.describe_noisy(bench.Table([_row("bb", 2e-3, 1e-4)])) == ""


def test_timing_from_single_call_times_and_whether_one_call_stands_out():
    steady = bench.Timing.from_times([1.0e-3, 1.1e-3, 0.9e-3, 1.0e-3, 1.05e-3], "cpu")
    assert steady.median == pytest.approx(1e-3) and steady.iqr == pytest.approx(0.05e-3) and not steady.noisy
    assert steady.stands_out(5e-3) and not steady.stands_out(1.2e-3)
    busy = bench.Timing.from_times([1e-3, 9e-3, 2e-3, 30e-3, 5e-3])
    assert busy.noisy and not busy.stands_out(20e-3)  # inside the spread of a busy machine: it shows nothing
    with pytest.raises(ValueError, match="at least one"):
        bench.Timing.from_times([])


@pytest.mark.parametrize("add_bytes_per_s, add_flops_per_s, expected", [
    (8e9, 1e9 / 1.5, "memory"),  # near the copy's bandwidth, far below the product's FLOP/s
    (1e9, 1e8, "unclear"),  # far below both ceilings: overhead or noise, not memory
    (8e9, 6e10, "compute"),
])
def test_limited_by_follows_from_the_measured_ceilings(add_bytes_per_s, add_flops_per_s, expected):
    add = bench.Timing(median=1e-3, iqr=0.0, times=[1e-3] * 5, num_threads=1, device="cpu",
                       flops=add_flops_per_s * 1e-3, nbytes=add_bytes_per_s * 1e-3)
    assert bench.limited_by(add, bandwidth=1e10, flops_per_s=1e11) == expected


def test_copy_work_counts_bytes_read_and_written():
    assert bench.copy_work(4) == {"nbytes": 2 * 16 * 4}
    assert bench.copy_work(4, torch.float16)["nbytes"] == 2 * 16 * 2


def test_importing_the_course_timer_keeps_the_extension_builders_note_off_stderr(tmp_path):
    """On a CUDA build of torch without a GPU, `import torch.utils.benchmark` logs "No CUDA runtime is found,
    using CUDA_HOME=..." to stderr when a CUDA toolkit is around (CUDA_HOME set here to make it so); importing
    helpers.benchmark must not, or every chapter's opening cell shows it. The CPU build never logs it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUDA_HOME": str(tmp_path)}

    def stderr_of(code):
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=120, check=True).stderr

    raw = stderr_of("import torch.utils.benchmark")
    cuda_build_without_gpu = bool(torch.version.cuda) and not torch.cuda.is_available()
    assert ("No CUDA runtime" in raw) == cuda_build_without_gpu, raw
    ours = stderr_of("import logging, helpers.benchmark; "
                     "assert logging.getLogger('torch.utils.cpp_extension').level == logging.NOTSET")
    assert "No CUDA runtime" not in ours, ours


# --------------------------------------------------------------------------- how timings are shown


def test_a_spread_too_few_blocks_cannot_know_is_shown_as_unknown_not_as_zero():
    """One block has an IQR of 0: a table or a Timing's line says "—" there, never "0 ns" (a perfectly steady run)."""
    one = bench.Timing.from_times([2e-3], label="one")
    three = bench.Timing.from_times([1e-3, 2e-3, 3e-3], label="three")
    assert one.iqr == 0 and not one.spread_known and three.spread_known
    table = bench.Table([one.as_row(), three.as_row()])
    header, _rule, one_row, three_row = table.format(["label", "median", "iqr"]).splitlines()
    assert one_row.split()[-1] == bench.UNKNOWN_SPREAD == "\u2014" and "0 ns" not in one_row
    spread = bench.format_seconds(three.iqr)
    assert three_row.endswith(spread) and three.iqr > 0  # a known spread keeps its figure and unit
    assert "(IQR \u2014)" in str(one) and f"(IQR {spread})" in str(three)
    assert "too few blocks to know its spread" in one.summary()
    hand_made = bench.Table([{"label": "by hand", "iqr": 0.0}])  # a row without a Timing: its figure as given
    assert "0 ns" in hand_made.format(["label", "iqr"])


def test_the_courses_warnings_are_shown_without_the_kernels_file_name():
    """Python shows a warning as ``file:line: Category: message`` plus the source line; in a notebook the file is
    the kernel's temporary file. The course's own warnings show only their class and message; others are
    untouched, and the place a warning was raised at stays on its record (for filters)."""
    cell = "/tmp/ipykernel_4242/1234567890.py"
    shown = warnings.formatwarning("timing on cpu: too noisy", bench.NoisyTimingWarning, cell, 3, "t = bench.x()")
    assert shown == "NoisyTimingWarning: timing on cpu: too noisy\n"
    other = warnings.formatwarning("something else", UserWarning, cell, 3, "t = bench.x()")
    assert other.startswith(f"{cell}:3: UserWarning: something else")
    cpu = SimulatedDevice("cpu")
    with cpu.active(), pytest.warns(bench.NoisyTimingWarning) as caught:
        bench.time_callable(cpu.kernel(0.05), "cpu", min_run_time=0.01, max_run_time=0.04)
    record = caught[0]
    assert record.filename == __file__  # raised at the caller's line, as stacklevel says
    shown = warnings.formatwarning(record.message, record.category, record.filename, record.lineno, record.line)
    assert shown.startswith("NoisyTimingWarning: ") and __file__ not in shown


def test_a_speed_up_ratio_is_written_as_the_language_writes_it():
    """"10.8x" in English, "10.8배" in Korean: the ratio's format is a catalog message like the sentence around it."""
    from helpers import i18n

    fast = bench.Timing.from_times([1e-3] * 5, label="fast")
    slow = bench.Timing.from_times([1.084e-2] * 5, label="slow")
    assert bench._times(1.834) == "1.83x" and bench._times(10.84) == "10.8x" and bench._times(123.4) == "123x"
    chosen = i18n._chosen
    try:
        i18n._chosen = "ko"
        assert bench._times(1.834) == "1.83배" and bench._times(10.84) == "10.8배" and bench._times(123.4) == "123배"
        sentence = bench.compare(fast, slow).sentence()
    finally:
        i18n._chosen = chosen
    assert "10.8배" in sentence and "x" not in sentence.replace("fast", "").replace("slow", "")
