# solution: time-on-device
# fails:
# says:
# Correct, written differently: every call timed the same way, the first `warmup` times thrown away.
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
    return statistics.median(times[warmup:])
