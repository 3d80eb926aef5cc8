"""helpers.benchmark: correct timing on any device, sweeps, and the stand-ins chapter 01 grades with.

Behaviour only, never speed: the simulated devices run on a virtual clock, so
what is asserted (synchronisation, warm-up, medians) does not depend on how
busy the machine is.
"""

import threading
import time
import timeit
import warnings

import numpy as np
import pytest
import torch

from helpers import benchmark as bench
from helpers import device as dev


def test_time_callable_reports_a_timing_with_throughput():
    a = torch.randn(32, 32)
    t = bench.time_callable(lambda: a @ a, "cpu", min_run_time=0.01, flops=2 * 32**3, nbytes=3 * 32 * 32 * 4, label="mm")
    assert isinstance(t, bench.Timing)
    assert t.median > 0 and t.iqr >= 0 and t.times and all(x > 0 for x in t.times)
    assert t.device == "cpu" and t.label == "mm"
    assert t.flops_per_s == pytest.approx(2 * 32**3 / t.median)
    assert t.bytes_per_s == pytest.approx(3 * 32 * 32 * 4 / t.median)
    assert "mm" in str(t) and "FLOP/s" in str(t)
    plain = bench.time_callable(lambda: a @ a, "cpu", min_run_time=0.01)
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
    gpu = bench.SimulatedDevice("cuda")
    with gpu.active():
        t = bench.time_callable(gpu.kernel(0.002), gpu.device, warmup=4, min_run_time=0.05)
    assert not any(busy for _, busy in gpu.events("clock")), "a clock was read while work was still queued"
    assert gpu.calls_before_first_clock() >= 4
    assert t.median == pytest.approx(0.002, rel=0.01)  # virtual time: the kernel's duration, not the launch


def test_time_callable_median_ignores_a_slow_call_and_warns_when_noisy():
    cpu = bench.SimulatedDevice("cpu")
    with cpu.active(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a steady measurement must not warn
        t = bench.time_callable(cpu.kernel(lambda i: 0.05 if i == 40 else 0.001), "cpu", min_run_time=0.1)
    assert t.median == pytest.approx(0.001, rel=1e-3)
    cpu = bench.SimulatedDevice("cpu")
    with cpu.active(), pytest.warns(bench.NoisyTimingWarning, match="spread"):
        bench.time_callable(cpu.kernel(lambda i: 0.001 * (1 + i % 3)), "cpu", min_run_time=0.1)


def test_adaptive_repetition_stops_at_max_run_time():
    cpu = bench.SimulatedDevice("cpu")
    with cpu.active():
        t = bench.time_callable(cpu.kernel(lambda i: 0.001 * (1 + i % 5)), "cpu", min_run_time=0.01,
                                max_run_time=0.5, warn=False)
    assert sum(t.times) * t.number_per_run <= 0.6 and len(t.times) > 3


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


def test_plot_sweep_draws_one_line_per_device():
    rows = bench.Table([{"device": d, "size": n, "median": 1e-3 * n, "flops_per_s": 1e9 * n}
                        for d in ("cpu", "cuda:0") for n in (8, 16, 32)])
    ax = bench.plot_sweep(rows, "flops_per_s")
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


def test_simulated_device_routes_every_public_sync_and_clock_then_restores_them():
    originals = (time.perf_counter, time.time_ns, timeit.default_timer, torch.cuda.synchronize, dev.synchronize,
                 torch.cuda.is_available)
    namespace = {"perf_counter": time.perf_counter, "synchronize": dev.synchronize, "other": 1}
    gpu = bench.SimulatedDevice("cuda")
    fn = gpu.kernel(0.01)
    with gpu.active([namespace]):
        assert torch.cuda.is_available() and torch.accelerator.is_available()
        routes = [torch.cuda.synchronize, torch.accelerator.synchronize, torch.mps.synchronize, dev.synchronize,
                  bench.synchronize, namespace["synchronize"]]
        for sync in routes:
            fn()
            assert gpu.busy
            sync("cuda")
            assert not gpu.busy
        start = namespace["perf_counter"]()
        fn()
        gpu.synchronize()
        assert namespace["perf_counter"]() - start == pytest.approx(0.01 + gpu.launch_s)
        assert time.perf_counter_ns() == pytest.approx(time.perf_counter() * 1e9)
        seen = []
        other = threading.Thread(target=lambda: seen.append(time.perf_counter()))
        other.start()
        other.join()
        assert seen[0] != pytest.approx(gpu.now)  # other threads keep the real clock
    assert (time.perf_counter, time.time_ns, timeit.default_timer, torch.cuda.synchronize, dev.synchronize,
            torch.cuda.is_available) == originals
    assert namespace == {"perf_counter": time.perf_counter, "synchronize": dev.synchronize, "other": 1}
    assert [e[0] for e in gpu.log[:3]] == ["call", "sync", "call"]


def test_simulated_cpu_is_synchronous():
    cpu = bench.SimulatedDevice("cpu")
    with cpu.active():
        start = time.perf_counter()
        cpu.kernel([0.5, 0.001])()
        assert time.perf_counter() - start == pytest.approx(0.5) and not cpu.busy


def test_cpu_only_machine_behaves_like_a_cpu_build():
    saved = torch.cuda.synchronize
    with bench.cpu_only_machine():
        assert not torch.cuda.is_available() and not torch.accelerator.is_available()
        with pytest.raises(AssertionError, match="not compiled"):
            torch.cuda.synchronize()
        dev.synchronize("cpu")  # the course's route is safe everywhere
    assert torch.cuda.synchronize is saved


def _reference_compare(make_work, sizes, accelerator, timer):
    sizes = list(sizes)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s, "speedup": speedup,
            "crossover": bench.crossover(sizes, speedup)}


def test_fake_comparison_passes_a_correct_comparison_and_names_mistakes():
    seconds = {"cpu": [1e-5, 1e-3, 1e-1], "cuda": [1e-4, 2e-3, 1e-3]}
    fake = bench.FakeComparison(seconds, run_timed=True)
    result = _reference_compare(fake.make_work, [8, 64, 512], "cuda", fake.timer)
    assert fake.speedup_verdict(result, [8, 64, 512]) is None
    assert fake.crossover_verdict(result, [8, 64, 512]) is None
    assert fake.setup_verdict([8, 64, 512], ["cpu", "cuda"]) is None
    inverted = dict(result, speedup=[1 / s for s in result["speedup"]])
    assert "inverted" in fake.speedup_verdict(inverted, [8, 64, 512])
    assert "crossover" in fake.crossover_verdict(dict(result, crossover=8), [8, 64, 512])

    inside = bench.FakeComparison(seconds, run_timed=True)
    inside.timer(lambda: inside.make_work(8, "cpu")(), "cpu")
    assert "timed region" in inside.setup_verdict([8], ["cpu"])

    none = bench.FakeComparison({"cpu": [1e-3, 2e-3]})
    assert none.no_accelerator_verdict(lambda: _reference_compare(none.make_work, [8, 16], None, none.timer), [8, 16]) is None
    assert "no accelerator" in none.no_accelerator_verdict(lambda: torch.device(None), [8, 16])


def test_fake_comparison_judges_the_crossover_against_the_learners_own_speedups():
    fake = bench.FakeComparison({"cpu": [1e-5, 1e-3, 1e-1], "cuda": [1e-4, 2e-3, 1e-3]})
    result = _reference_compare(fake.make_work, [8, 64, 512], "cuda", fake.timer)
    inverted = [1 / s for s in result["speedup"]]
    consistent = dict(result, speedup=inverted, crossover=bench.crossover([8, 64, 512], inverted))
    assert fake.crossover_verdict(consistent, [8, 64, 512]) is None  # the speed-up check names the inversion
    tie = bench.FakeComparison({"cpu": [1e-5, 2e-3, 4e-3], "cuda": [1e-4, 2e-3, 1e-3]})
    result = _reference_compare(tie.make_work, [8, 64, 512], "cuda", tie.timer)
    assert result["crossover"] == 512
    assert "tie" in tie.crossover_verdict(dict(result, crossover=64), [8, 64, 512])


def test_fake_comparison_names_an_ignored_timer_and_makes_syncs_harmless():
    fake = bench.FakeComparison({"cpu": [1e-3, 2e-3], "cuda": [1e-4, 1e-4]})

    def own_timer(fn, device):
        fn()
        torch.cuda.synchronize()  # raises on a CPU-only build, but not while the fake is active
        return 1e-6

    with bench.cpu_only_machine(), fake.active():
        result = _reference_compare(fake.make_work, [8, 16], "cuda", own_timer)
    assert "`timer`" in fake.speedup_verdict(result, [8, 16])
    none = bench.FakeComparison({"cpu": [1e-3, 2e-3]})
    with none.active():  # the speed-up check names the ignored timer; this one judges only the None answer
        assert none.no_accelerator_verdict(lambda: _reference_compare(none.make_work, [8, 16], None, own_timer),
                                           [8, 16]) is None


def _median_timer(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        dev.synchronize(device)
        start = time.perf_counter()
        fn()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def test_simulate_timer_runs_a_timer_on_a_fresh_simulated_device():
    sim, t = bench.simulate_timer(_median_timer, "cuda", 0.002, warmup=2, repeats=3)
    assert sim.calls == 5 and t == pytest.approx(0.002 + sim.launch_s)
    assert not any(busy for _, busy in sim.events("clock"))


def test_simulate_timer_retries_a_device_name_as_a_torch_device():
    def needs_a_device_object(fn, device, warmup=3, repeats=10):
        assert device.type in ("cpu", "cuda")  # a str has no .type
        return _median_timer(fn, device, warmup, repeats)

    sim, t = bench.simulate_timer(needs_a_device_object, "cpu", 0.001, "cpu", warmup=1, repeats=1)
    assert sim.calls == 2 and t == pytest.approx(0.001)
    with pytest.raises(AttributeError):
        bench.simulate_timer(lambda fn, device, **kw: device.nope, "cpu", 0.001, torch.device("cpu"))


@pytest.mark.parametrize("value, expected", [(0.5, 0.5), (2, 2.0), (np.float64(0.25), 0.25),
                                             (torch.tensor(0.125), 0.125), (torch.tensor([1.5]), 1.5),
                                             (torch.tensor([1.0, 2.0]), None), ("0.1", None), (True, None),
                                             (None, None), ([0.1], None), (float("nan"), None)])
def test_as_seconds_accepts_one_number_of_any_numeric_type(value, expected):
    assert bench.as_seconds(value) == expected


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
