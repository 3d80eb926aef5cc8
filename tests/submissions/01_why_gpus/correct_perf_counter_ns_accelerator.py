# solution: time-on-device
# fails:
# says:
# Correct, written differently: perf_counter_ns and the device-agnostic torch.accelerator.synchronize().
from time import perf_counter_ns


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)

    def wait():
        if device.type != "cpu" and torch.accelerator.is_available():
            torch.accelerator.synchronize()

    for _ in range(warmup):
        fn()
    wait()
    elapsed = []
    for _ in range(repeats):
        t0 = perf_counter_ns()
        fn()
        wait()
        elapsed.append((perf_counter_ns() - t0) / 1e9)
    elapsed.sort()
    mid = len(elapsed) // 2
    return elapsed[mid] if len(elapsed) % 2 else (elapsed[mid - 1] + elapsed[mid]) / 2
