# solution: time-on-device
# fails: time-on-device-sync
# says: guard
# Typical mistake: a guard on the device's full name, in a helper of its own. torch.device("cuda") prints as
# "cuda", not "cuda:0", so the helper never synchronises.
import statistics
import time


def wait(device):
    if str(device) == "cuda:0":
        torch.cuda.synchronize(device)


def time_on_device(fn, device, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        wait(device)
        start = time.perf_counter()
        fn()
        wait(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
