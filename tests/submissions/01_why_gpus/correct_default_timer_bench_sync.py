# solution: time-on-device
# fails:
# says:
# Correct, written differently: timeit.default_timer, bench.synchronize, chained clock reads, torch's median.
import timeit


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    bench.synchronize(device)
    times = []
    last = timeit.default_timer()
    for _ in range(repeats):
        fn()
        bench.synchronize(device)
        now = timeit.default_timer()
        times.append(now - last)
        last = now
    return torch.tensor(times, dtype=torch.float64).median().item()
