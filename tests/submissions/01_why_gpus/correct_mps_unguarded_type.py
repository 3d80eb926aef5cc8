# solution: time-on-device
# fails:
# says:
# Correct on a Mac, written differently: torch.mps.synchronize() for any non-CPU device, perf_counter bound by name.
from statistics import median
from time import perf_counter


def time_on_device(fn, device, warmup=3, repeats=10):
    on_cpu = torch.device(device).type == "cpu"
    for _ in range(warmup):
        fn()
    durations = []
    for _ in range(repeats):
        if not on_cpu:
            torch.mps.synchronize()
        t = perf_counter()
        fn()
        if not on_cpu:
            torch.mps.synchronize()
        durations.append(perf_counter() - t)
    return median(durations)
