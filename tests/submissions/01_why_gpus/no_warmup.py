# solution: time-on-device
# fails: time-on-device-warmup
# says: warm-up
# Typical mistake: no warm-up, so the first (slow) calls are timed.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    times = []
    for _ in range(repeats):
        dev.synchronize(device)
        start = time.perf_counter()
        fn()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
