# solution: time-on-device
# fails:
# says:
# Correct, written differently: torch.accelerator.synchronize() guarded only by torch.accelerator.is_available(),
# a while loop, statistics.median_low.
import statistics
from time import monotonic


def time_on_device(fn, device, warmup=3, repeats=10):
    def sync():
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()

    n = 0
    while n < warmup:
        fn()
        n += 1
    sync()
    times = []
    while len(times) < repeats:
        start = monotonic()
        fn()
        sync()
        times.append(monotonic() - start)
    return statistics.median_low(times)
