# solution: time-on-device
# fails: time-on-device-runs
# says: string
# Typical mistake: device.type on the argument as given, which fails for a device name such as "cuda".
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
