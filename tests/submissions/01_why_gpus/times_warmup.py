# solution: time-on-device
# fails: time-on-device-untimed-warmup
# says: warm-up
# Typical mistake: the warm-up calls are made, but timed and kept with the others.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    times = []
    for _ in range(warmup + repeats):
        dev.synchronize(device)
        start = time.perf_counter()
        fn()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
