# solution: time-on-device
# fails: time-on-device-sync
# says: synchroni
# Typical mistake: synchronises before starting the clock, but stops it while the work is still queued.
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
        times.append(time.perf_counter() - start)
    return statistics.median(times)
