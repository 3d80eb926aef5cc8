# solution: time-on-device
# fails:
# says:
# Correct, written differently: time.monotonic, torch.cuda.synchronize guarded by the device type (and MPS on a Mac).
import statistics
import time


def _wait(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_on_device(fn, device, warmup=3, repeats=10):
    device = device if isinstance(device, torch.device) else torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        _wait(device)
        begin = time.monotonic()
        fn()
        _wait(device)
        times.append(time.monotonic() - begin)
    return float(statistics.median(times))
