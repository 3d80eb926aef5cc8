# solution: time-on-device
# fails: time-on-device-sync
# says: synchroni
# Typical mistake (d2l's Benchmark): a host clock and no synchronisation, so a GPU's queued work is not counted.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
