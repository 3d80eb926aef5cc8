# solution: time-on-device
# fails: time-on-device-sync
# says: guard
# Typical mistake: an always-false guard. After device = torch.device(device), `device == "cuda"` is False
# (a torch.device never equals a string), so the GPU is never synchronised.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
