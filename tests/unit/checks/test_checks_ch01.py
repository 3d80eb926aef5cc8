"""helpers.checks.ch01: the stand-ins chapter 01 grades with, and its verdicts.

The simulated device and the injected comparison must route every public
clock and way to synchronise while active, put everything back afterwards
(after an error too, and in a learner's namespace), and their verdicts must
pass a correct answer and name each mistake.
"""

import statistics
import threading
import time
import timeit

import numpy as np
import pytest
import torch

from helpers import benchmark as bench
from helpers import device as dev
from helpers.checks import CheckFailed, ch01, cpu_only_machine, delegation
from helpers.checks.fakes.comparison import FakeComparison
from helpers.checks.fakes.simulated_gpu import SimulatedDevice


def _real():
    return (time.perf_counter, time.time_ns, timeit.default_timer, torch.cuda.synchronize, torch.mps.synchronize,
            torch.accelerator.synchronize, dev.synchronize, bench.synchronize, torch.cuda.is_available,
            torch.cuda.Event, torch.Event, torch.cuda.current_stream, torch.cuda.default_stream)


# --------------------------------------------------------------------------- the simulated device


def test_simulated_device_routes_every_public_sync_and_clock_then_restores_them():
    originals = _real()
    namespace = {"perf_counter": time.perf_counter, "synchronize": dev.synchronize, "other": 1}
    gpu = SimulatedDevice("cuda")
    fn = gpu.kernel(0.01)
    with gpu.active([namespace]):
        assert torch.cuda.is_available() and torch.accelerator.is_available()
        assert dev.pick_device() == torch.device("cuda", 0)  # a machine with one GPU: the fake machine's answer
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
    assert _real() == originals
    assert namespace == {"perf_counter": time.perf_counter, "synchronize": dev.synchronize, "other": 1}
    assert [e[0] for e in gpu.log[:3]] == ["call", "sync", "call"]


def test_simulated_device_restores_everything_after_an_error():
    originals = _real()
    namespace = {"clock": time.perf_counter, "wait": dev.synchronize}
    with pytest.raises(ZeroDivisionError), SimulatedDevice("cuda").active([namespace]):
        assert namespace["clock"] is time.perf_counter is not originals[0]  # rebound to the simulated clock
        assert namespace["wait"] is dev.synchronize is not originals[6]
        1 / 0
    assert _real() == originals
    assert namespace == {"clock": originals[0], "wait": originals[6]}


def test_simulated_cpu_is_synchronous_on_a_machine_without_a_gpu():
    cpu = SimulatedDevice("cpu")
    with cpu.active():
        assert not torch.cuda.is_available()
        start = time.perf_counter()
        cpu.kernel([0.5, 0.001])()
        assert time.perf_counter() - start == pytest.approx(0.5) and not cpu.busy
        torch.cuda.synchronize()  # routed to the simulated device: the CPU has nothing to wait for


def test_cpu_only_machine_behaves_like_a_cpu_build():
    saved = torch.cuda.synchronize
    with cpu_only_machine():
        assert not torch.cuda.is_available() and not torch.accelerator.is_available()
        with pytest.raises(AssertionError, match="not compiled"):
            torch.cuda.synchronize()
        dev.synchronize("cpu")  # the course's route is safe everywhere
    assert torch.cuda.synchronize is saved


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
    sim, t = ch01.simulate_timer(_median_timer, "cuda", 0.002, warmup=2, repeats=3)
    assert sim.calls == 5 and t == pytest.approx(0.002 + sim.launch_s)
    assert not any(busy for _, busy in sim.events("clock"))


def test_simulate_timer_retries_a_device_name_as_a_torch_device():
    def needs_a_device_object(fn, device, warmup=3, repeats=10):
        assert device.type in ("cpu", "cuda")  # a str has no .type
        return _median_timer(fn, device, warmup, repeats)

    sim, t = ch01.simulate_timer(needs_a_device_object, "cpu", 0.001, "cpu", warmup=1, repeats=1)
    assert sim.calls == 2 and t == pytest.approx(0.001)
    with pytest.raises(AttributeError):
        ch01.simulate_timer(lambda fn, device, **kw: device.nope, "cpu", 0.001, torch.device("cpu"))


@pytest.mark.parametrize("value, expected", [(0.5, 0.5), (2, 2.0), (np.float64(0.25), 0.25),
                                             (torch.tensor(0.125), 0.125), (torch.tensor([1.5]), 1.5),
                                             (torch.tensor([1.0, 2.0]), None), ("0.1", None), (True, None),
                                             (None, None), ([0.1], None), (float("nan"), None)])
def test_as_seconds_accepts_one_number_of_any_numeric_type(value, expected):
    assert ch01.as_seconds(value) == expected


# --------------------------------------------------------------------------- the timer's verdicts


def time_on_device(fn, device, warmup=3, repeats=10):
    """The reference answer, as the learner's cell defines it."""
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
    return statistics.median(times)


DURATIONS = [0.001] * 3 + [0.0011, 0.0008, 0.001, 0.0012, 0.0009, 0.02, 0.001, 0.0011, 0.02, 0.001]


def test_a_correct_timer_passes_every_timer_check():
    ch01.check_runs(time_on_device, "cpu", warmup=1, repeats=3)
    ch01.check_sync(time_on_device, kernel_s=0.002, warmup=3, repeats=10, device="cuda")
    ch01.check_warmup(time_on_device, warmup=3, repeats=10)
    ch01.check_untimed_warmup(time_on_device, [0.05, 0.04, 0.05, 0.0011, 0.001, 0.0012], warmup=3)
    ch01.check_median(time_on_device, DURATIONS, warmup=3, repeats=10)


def test_the_timer_checks_name_each_mistake():
    def no_sync(fn, device, warmup=3, repeats=10):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.mean(times)

    no_sync.__name__ = "time_on_device"
    with pytest.raises(CheckFailed, match="no synchronisation"):
        ch01.check_sync(no_sync, kernel_s=0.002, warmup=3, repeats=10)
    with pytest.raises(CheckFailed, match="mean"):
        ch01.check_median(no_sync, DURATIONS, warmup=3, repeats=10)

    def unguarded(fn, device, warmup=3, repeats=10):
        torch.cuda.synchronize()
        return 0.0

    with pytest.raises(CheckFailed, match=r"torch\.cuda\.synchronize\(\) raises there"):
        ch01.check_runs(unguarded, torch.device("cpu"), warmup=1, repeats=1)


def _guarded(condition):
    def time_on_device(fn, device, warmup=3, repeats=10):
        device = torch.device(device)
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            if condition(device):
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            if condition(device):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    return time_on_device


@pytest.mark.parametrize("condition", [lambda d: d == "cuda", lambda d: str(d) == "cuda:0",
                                       lambda d: d.type == "gpu"])
def test_a_synchronisation_behind_an_always_false_guard_is_named(condition):
    with pytest.raises(CheckFailed, match="guard around it.*always false") as err:
        ch01.check_sync(_guarded(condition), kernel_s=0.002, warmup=3, repeats=10)
    assert "torch.device('cuda') == 'cuda' is False" in str(err.value)
    ch01.check_sync(_guarded(lambda d: d.type == "cuda"), kernel_s=0.002, warmup=3, repeats=10)


def test_the_guard_is_quoted_from_the_source_and_found_in_a_helper():
    def wait(device):
        if device == "cuda":
            torch.cuda.synchronize()

    def time_on_device(fn, device, warmup=3, repeats=10):
        fn()
        start = time.perf_counter()
        fn()
        wait(device)
        return time.perf_counter() - start

    with pytest.raises(CheckFailed, match=r"\(`if device == \"cuda\":`\)"):
        ch01.check_sync(time_on_device, kernel_s=0.002, warmup=1, repeats=1)
    assert ch01.sync_functions(time_on_device) == [wait]


def test_a_constant_answer_that_never_calls_fn_loses_with_a_reason():
    def time_on_device(fn, device, warmup=3, repeats=10):
        return 0.001

    for check in (lambda: ch01.check_runs(time_on_device, "cpu", warmup=1, repeats=2),
                  lambda: ch01.check_sync(time_on_device, kernel_s=0.002, warmup=3, repeats=10),
                  lambda: ch01.check_warmup(time_on_device, warmup=3, repeats=10),
                  lambda: ch01.check_median(time_on_device, DURATIONS, warmup=3, repeats=10)):
        with pytest.raises(CheckFailed, match="never called fn"):
            check()


def test_a_correct_answer_that_warns_keeps_stderr_clean():
    """nbgrader scores a grade cell that writes to stderr 0, and a warning alone never costs points."""
    import warnings

    def time_on_device(fn, device, warmup=3, repeats=10):
        warnings.warn("a harmless note", UserWarning)
        return _median_timer(fn, device, warmup, repeats)

    def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
        warnings.warn("a harmless note", FutureWarning)
        return _reference_compare(make_work, sizes, accelerator, timer)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ch01.check_runs(time_on_device, "cpu", warmup=1, repeats=1)
        ch01.check_warmup(time_on_device, warmup=2, repeats=3)
        ch01.check_speedup(compare_devices, [8, 16], cpu_s=[1e-3, 2e-3], accelerator_s=[1e-4, 1e-4])
        ch01.check_no_accelerator(compare_devices, [8, 16], cpu_s=[1e-3, 2e-3])


def test_calling_the_course_timer_is_not_an_answer():
    def time_on_device(fn, device, warmup=3, repeats=10):
        return bench.time_callable(fn, device, warmup=warmup, min_run_time=0.01).median

    with pytest.raises(CheckFailed, match="write it yourself: `helpers.benchmark.time_callable`"):
        ch01.check_runs(time_on_device, "cpu", warmup=1, repeats=1)
    with pytest.raises(CheckFailed, match="write it yourself"):
        ch01.check_sync(time_on_device, kernel_s=0.002, warmup=3, repeats=10)
    assert bench.time_callable(lambda: None, "cpu", min_run_time=0.001).median > 0  # the tripwire is gone again


def test_dev_synchronize_stays_allowed_inside_the_timer():
    assert not any("helpers.device" in spec for spec in delegation.COURSE_VERSIONS["time_on_device"])


def test_every_listed_course_version_exists():
    import importlib

    for exercise in ("time_on_device", "compare_devices"):
        for spec in delegation.COURSE_VERSIONS[exercise]:
            module, _, name = spec.partition(":")
            assert callable(getattr(importlib.import_module(module), name)), spec


# --------------------------------------------------------------------------- CUDA events


def test_a_simulated_event_marks_the_queue_and_times_the_device_in_milliseconds():
    gpu = SimulatedDevice("cuda")
    fn = gpu.kernel(0.004)
    with gpu.active():
        start, end = torch.cuda.Event(enable_timing=True), torch.Event("cuda", enable_timing=True)
        fn()  # queued before the start mark: not timed
        start.record()
        fn()
        end.record()
        assert gpu.busy and not end.query()
        with pytest.raises(RuntimeError, match="must be completed"):
            start.elapsed_time(end)  # the end mark is not reached yet
        end.synchronize()
        assert not gpu.busy and end.query()
        assert start.elapsed_time(end) == pytest.approx(4.0)  # milliseconds, the device's time
        with pytest.raises(ValueError, match="enable_timing=True"):
            torch.cuda.Event().elapsed_time(end)
        with pytest.raises(ValueError, match="must be recorded"):
            torch.cuda.Event(enable_timing=True).elapsed_time(end)
    assert [m for _, m in gpu.events("elapsed")] == ["pending", "ok", "untimed", "unrecorded"]


def test_simulated_events_are_put_back_and_polling_an_event_ends():
    originals = _real()
    namespace = {"Event": torch.cuda.Event}
    gpu = SimulatedDevice("cuda")
    with gpu.active([namespace]):
        start, end = namespace["Event"](enable_timing=True), namespace["Event"](enable_timing=True)
        start.record()
        gpu.kernel(0.001)()
        end.record()
        polls = 0
        while not end.query():  # a busy-wait on the event is a wait too
            polls += 1
        assert polls > 0 and start.elapsed_time(end) == pytest.approx(1.0 + gpu.launch_s * 1e3)
    assert _real() == originals and namespace == {"Event": torch.cuda.Event}


def test_the_simulated_stream_is_the_device_queue_and_events_are_a_class():
    gpu = SimulatedDevice("cuda")
    with gpu.active():
        stream = torch.cuda.current_stream()
        assert torch.cuda.default_stream("cuda") is stream
        start = stream.record_event(torch.cuda.Event(enable_timing=True))
        gpu.kernel(0.002)()
        end = stream.record_event(torch.cuda.Event(enable_timing=True))
        assert gpu.busy and not stream.query()
        stream.synchronize()
        assert not gpu.busy and stream.query() and gpu.events("sync")
        assert isinstance(start, torch.cuda.Event)
        assert torch.cuda.Event.elapsed_time(start, end) == pytest.approx(2.0 + gpu.launch_s * 1e3)


def test_a_timer_that_waits_on_the_current_stream_passes():
    def time_on_device(fn, device, warmup=3, repeats=10):
        device = torch.device(device)
        wait = torch.cuda.current_stream(device).synchronize if device.type == "cuda" else (lambda: None)
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            wait()
            start = time.perf_counter()
            fn()
            wait()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    ch01.check_sync(time_on_device, kernel_s=0.002, warmup=3, repeats=10)
    ch01.check_sync(time_on_device, kernel_s=0.001, warmup=1, repeats=3, device="cuda:0")


def _event_timer(*, ms=False, enable_timing=True, wait=True, guard=True):
    """A timer built on CUDA events for a GPU and on perf_counter elsewhere, with one mistake switched on."""

    def time_on_device(fn, device, warmup=3, repeats=10):
        device = torch.device(device)
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            if device.type == "cuda" or not guard:
                start = torch.cuda.Event(enable_timing=enable_timing)
                end = torch.cuda.Event(enable_timing=enable_timing)
                start.record()
                fn()
                end.record()
                if wait:
                    end.synchronize()
                elapsed = start.elapsed_time(end)
                times.append(elapsed if ms else elapsed / 1e3)
            else:
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
        return statistics.median(times)

    return time_on_device


def test_a_timer_built_on_cuda_events_passes_every_timer_check():
    timer = _event_timer()
    ch01.check_runs(timer, "cpu", warmup=1, repeats=3)
    ch01.check_sync(timer, kernel_s=0.002, warmup=3, repeats=10)
    ch01.check_sync(timer, kernel_s=0.0003, warmup=4, repeats=5, device=torch.device("cuda"))
    ch01.check_warmup(timer, warmup=3, repeats=10)
    ch01.check_untimed_warmup(timer, [0.05, 0.04, 0.05, 0.0011, 0.001, 0.0012], warmup=3)
    ch01.check_median(timer, DURATIONS, warmup=3, repeats=10)


def test_events_synchronised_once_after_every_call_are_right_too():
    def time_on_device(fn, device, warmup=3, repeats=10):
        for _ in range(warmup):
            fn()
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(repeats)]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in pairs) / 1000

    ch01.check_sync(time_on_device, kernel_s=0.002, warmup=3, repeats=10, device="cuda")


@pytest.mark.parametrize("mistake, says", [({"ms": True}, "milliseconds returned as seconds"),
                                           ({"enable_timing": False}, "without enable_timing=True"),
                                           ({"wait": False}, "before the end event had finished.*end.synchronize")])
def test_each_event_mistake_costs_the_sync_check_with_its_name(mistake, says):
    timer = _event_timer(**mistake)
    with pytest.raises(CheckFailed, match=says):
        ch01.check_sync(timer, kernel_s=0.002, warmup=3, repeats=10)
    ch01.check_median(timer, DURATIONS, warmup=3, repeats=10)  # the CPU path is right: one mistake, one check


def test_events_on_a_machine_without_a_gpu_are_named():
    with pytest.raises(CheckFailed, match="after it created a torch.cuda.Event.*device.type == 'cuda'"):
        ch01.check_runs(_event_timer(guard=False), "cpu", warmup=1, repeats=2)
    assert _real()[-4:] == (torch.cuda.Event, torch.Event, torch.cuda.current_stream, torch.cuda.default_stream)


# --------------------------------------------------------------------------- the injected comparison


def _reference_compare(make_work, sizes, accelerator, timer):
    sizes = list(sizes)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for n, s in reversed(list(zip(sizes, speedup))):
        if s <= 1:
            break
        crossover = n
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s, "speedup": speedup,
            "crossover": crossover}


def test_fake_comparison_passes_a_correct_comparison_and_names_mistakes():
    seconds = {"cpu": [1e-5, 1e-3, 1e-1], "cuda": [1e-4, 2e-3, 1e-3]}
    fake = FakeComparison(seconds, run_timed=True)
    result = _reference_compare(fake.make_work, [8, 64, 512], "cuda", fake.timer)
    assert ch01.speedup_verdict(fake, result, [8, 64, 512]) is None
    assert ch01.crossover_verdict(fake, result, [8, 64, 512]) is None
    assert ch01.setup_verdict(fake, [8, 64, 512], ["cpu", "cuda"]) is None
    inverted = dict(result, speedup=[1 / s for s in result["speedup"]])
    assert "inverted" in ch01.speedup_verdict(fake, inverted, [8, 64, 512])
    assert "crossover" in ch01.crossover_verdict(fake, dict(result, crossover=8), [8, 64, 512])

    inside = FakeComparison(seconds, run_timed=True)
    inside.timer(lambda: inside.make_work(8, "cpu")(), "cpu")
    assert "timed region" in ch01.setup_verdict(inside, [8], ["cpu"])

    none = FakeComparison({"cpu": [1e-3, 2e-3]})
    assert ch01.no_accelerator_verdict(none, lambda: _reference_compare(none.make_work, [8, 16], None, none.timer), [8, 16]) is None
    assert "no accelerator" in ch01.no_accelerator_verdict(none, lambda: torch.device(None), [8, 16])


def test_the_crossover_is_judged_against_the_true_speedups_so_a_wrong_ratio_costs_it_nothing():
    fake = FakeComparison({"cpu": [1e-5, 1e-3, 1e-1], "cuda": [1e-4, 2e-3, 1e-3]})
    result = _reference_compare(fake.make_work, [8, 64, 512], "cuda", fake.timer)
    inverted = [1 / s for s in result["speedup"]]
    from_times = dict(result, speedup=inverted)  # the crossover found from the times: right
    assert ch01.crossover_verdict(fake, from_times, [8, 64, 512]) is None
    consistent = dict(result, speedup=inverted, crossover=bench.crossover([8, 64, 512], inverted))
    assert ch01.crossover_verdict(fake, consistent, [8, 64, 512]) is None  # right logic on a wrong ratio
    assert "expected 512" in ch01.crossover_verdict(fake, dict(result, crossover=64), [8, 64, 512])
    assert ch01.crossover_verdict(fake, dict(result, crossover=np.int64(512)), [8, 64, 512]) is None
    assert ch01.crossover_verdict(fake, dict(result, crossover=torch.tensor(512)), [8, 64, 512]) is None


@pytest.mark.parametrize("speedups, got, says", [
    ([0.1, 2.0, 0.5, 1.0, 100.0], 128, "first size where it wins"),
    ([0.1, 2.0, 0.5, 1.0, 100.0], 1024, "tie"),
    ([2.0, 10.0], None, "faster at every size"),
])
def test_each_wrong_crossover_is_named(speedups, got, says):
    sizes = [16, 128, 512, 1024, 2048][:len(speedups)]
    fake = FakeComparison({"cpu": [s * 1e-3 for s in speedups], "cuda": [1e-3] * len(speedups)})
    result = _reference_compare(fake.make_work, sizes, "cuda", fake.timer)
    assert ch01.crossover_verdict(fake, result, sizes) is None
    assert says in ch01.crossover_verdict(fake, dict(result, crossover=got), sizes)


def test_timing_the_accelerator_on_cpu_inputs_is_named_in_both_checks():
    def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
        works = [make_work(n, "cpu") for n in sizes]
        cpu_s = [timer(w, "cpu") for w in works]
        acc_s = [timer(w, accelerator) for w in works]
        speedup = [c / a for c, a in zip(cpu_s, acc_s)]
        return {"accelerator": accelerator, "sizes": list(sizes), "cpu_s": cpu_s, "accelerator_s": acc_s,
                "speedup": speedup, "crossover": bench.crossover(sizes, speedup)}

    case = dict(cpu_s=[1e-3, 2e-3], accelerator_s=[1e-4, 1e-4])
    with pytest.raises(CheckFailed, match=r"wrong device.*make_work\(size, 'cpu'\)"):
        ch01.check_speedup(compare_devices, [8, 16], **case)
    with pytest.raises(CheckFailed, match="wrong device"):
        ch01.check_untimed_setup(compare_devices, [8, 16], **case)


def test_a_constant_comparison_loses_the_crossover_too():
    """Its speed-ups come from no measurement, so its crossover is judged against the injected timings."""
    def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
        return {"accelerator": accelerator, "sizes": list(sizes), "cpu_s": [1.0] * len(sizes),
                "accelerator_s": [0.5] * len(sizes), "speedup": [2.0] * len(sizes), "crossover": sizes[0]}

    case = dict(cpu_s=[1e-6, 1e-3], accelerator_s=[1e-5, 2e-3])
    for check, says in [(ch01.check_speedup, "not timed"), (ch01.check_crossover, "expected None"),
                        (ch01.check_untimed_setup, "make_work was not called"),
                        (ch01.check_no_accelerator, "should be None")]:
        with pytest.raises(CheckFailed, match=says):
            if check is ch01.check_no_accelerator:
                check(compare_devices, [16, 512], cpu_s=case["cpu_s"])
            else:
                check(compare_devices, [16, 512], **case)


def test_fake_comparison_names_an_ignored_timer_and_makes_syncs_harmless():
    fake = FakeComparison({"cpu": [1e-3, 2e-3], "cuda": [1e-4, 1e-4]})

    def own_timer(fn, device):
        fn()
        torch.cuda.synchronize()  # raises on a CPU-only build, but not while the fake is active
        return 1e-6

    with cpu_only_machine(), fake.active():
        result = _reference_compare(fake.make_work, [8, 16], "cuda", own_timer)
    assert "`timer`" in ch01.speedup_verdict(fake, result, [8, 16])
    none = FakeComparison({"cpu": [1e-3, 2e-3]})
    with none.active():  # the speed-up check names the ignored timer; this one judges only the None answer
        assert ch01.no_accelerator_verdict(none, lambda: _reference_compare(none.make_work, [8, 16], None, own_timer),
                                           [8, 16]) is None


def test_fake_comparison_restores_the_syncs_and_the_namespace_after_an_error():
    originals = _real()
    namespace = {"sync": torch.cuda.synchronize}
    with pytest.raises(KeyError), FakeComparison({"cpu": [1.0]}).active([namespace]):
        assert namespace["sync"] is not originals[3]
        {}["nope"]
    assert _real() == originals and namespace == {"sync": originals[3]}


def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    return _reference_compare(make_work, sizes, accelerator, timer)


def test_a_correct_comparison_passes_every_comparison_check():
    ch01.check_speedup(compare_devices, [64, 256, 1024], cpu_s=[1e-5, 4e-4, 3e-2], accelerator_s=[4e-5, 2e-4, 1e-3])
    ch01.check_crossover(compare_devices, [16, 512], cpu_s=[1e-6, 1e-3], accelerator_s=[1e-5, 2e-3])
    ch01.check_untimed_setup(compare_devices, [8, 16], cpu_s=[1e-3, 2e-3], accelerator_s=[1e-4, 1e-4],
                             accelerator=torch.device("cuda"))
    ch01.check_no_accelerator(compare_devices, [64, 256], cpu_s=[1e-4, 1e-3])


def test_calling_the_course_crossover_costs_only_the_crossover_check():
    def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
        result = _reference_compare(make_work, sizes, accelerator, timer)
        if accelerator is not None:
            result["crossover"] = bench.crossover(result["sizes"], result["speedup"])
        return result

    listed = dict(delegation.COURSE_VERSIONS["compare_devices"])
    ch01.check_speedup(compare_devices, [64, 256], cpu_s=[1e-5, 4e-4], accelerator_s=[4e-5, 2e-4])
    ch01.check_untimed_setup(compare_devices, [64, 256], cpu_s=[1e-5, 4e-4], accelerator_s=[4e-5, 2e-4])
    assert delegation.COURSE_VERSIONS["compare_devices"] == listed  # allowed there, and only there
    with pytest.raises(CheckFailed, match="write it yourself: `helpers.benchmark.crossover`"):
        ch01.check_crossover(compare_devices, [64, 256], cpu_s=[1e-5, 4e-4], accelerator_s=[4e-5, 2e-4])
    assert bench.crossover([1, 2], [2.0, 3.0]) == 1  # the tripwire is gone again
