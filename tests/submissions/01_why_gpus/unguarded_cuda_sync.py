# solution: time-on-device
# fails: time-on-device-runs
# says: torch.cuda.synchronize
# Typical mistake: torch.cuda.synchronize() called for every device; it raises on a machine without CUDA.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
