# solution: time-on-device
# fails: time-on-device-median
# says: sort
# Typical mistake: the middle element of the times in call order, not of the sorted times.
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
    return times[len(times) // 2]
