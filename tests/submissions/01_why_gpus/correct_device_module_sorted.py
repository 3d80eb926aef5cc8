# solution: time-on-device
# fails:
# says:
# Correct, written differently: torch.get_device_module(device).synchronize() (torch.cuda's for CUDA, a no-op
# for the CPU), perf_counter_ns converted per call, the upper middle of the sorted times.
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    module = torch.get_device_module(torch.device(device))
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        module.synchronize()
        t0 = time.perf_counter_ns()
        fn()
        module.synchronize()
        times.append((time.perf_counter_ns() - t0) * 1e-9)
    return sorted(times)[len(times) // 2]
