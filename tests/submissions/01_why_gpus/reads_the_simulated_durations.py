# solution: time-on-device
# fails: time-on-device-sync time-on-device-untimed-warmup time-on-device-median
# says: time_on_device
# Tampering with a fake's state (issue 33): on the simulated GPU it reads the kernel's durations out of fn's
# closure and returns their median without timing anything; on a real device it times honestly. The checks judge
# a result by the clock reads that show it, which this one never made.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    if "duration" in cells:
        for _ in range(warmup + repeats):
            fn()
        return statistics.median(cells["duration"](i) for i in range(warmup, warmup + repeats))
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
