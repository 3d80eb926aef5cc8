# solution: time-on-device
# fails: time-on-device-median
# says: total
# Typical mistake: one clock around all the timed calls, returning the total instead of one call's time.
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    dev.synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    dev.synchronize(device)
    return time.perf_counter() - start
