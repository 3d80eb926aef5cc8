# solution: time-on-device
# fails:
# says:
# Correct, written differently: torch's median returned as a 0-d tensor (no .item()).
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
    return torch.tensor(times).median()
