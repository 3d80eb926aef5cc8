# solution: time-on-device
# fails: time-on-device-sync
# says: guard
# Typical mistake: `is` where `==` was meant. device.type is a new string each time, so `device.type is "cuda"`
# is False even on a GPU and the guard never lets the synchronisation run.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type is "cuda":  # noqa: F632 - the mistake itself
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type is "cuda":  # noqa: F632
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
