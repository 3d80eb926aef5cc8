# solution: time-on-device
# fails: time-on-device-median
# says: milliseconds
# Typical mistake: the median converted to milliseconds, where the contract says seconds.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
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
    return statistics.median(times) * 1000
