# solution: time-on-device
# fails: time-on-device-untimed-warmup
# says: warm-up
# Typical mistake: the warm-up calls timed and kept, hidden by a lower-middle median (torch's) of an even count.
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    times = []
    for _ in range(warmup):
        dev.synchronize(device)
        start = time.perf_counter()
        fn()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
    for _ in range(repeats):
        dev.synchronize(device)
        start = time.perf_counter()
        fn()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
    return torch.tensor(times).median().item()
