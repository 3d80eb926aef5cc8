# solution: time-on-device
# fails: time-on-device-sync
# says: warm-up
# Typical mistake: synchronises only before stopping the clock, so the first clock starts while the
# warm-up is still running on the device and its tail is timed with the first call.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
