# solution: time-on-device
# fails:
# says:
# Correct, written differently: synchronise whenever CUDA is available, perf_counter_ns, median by sorting.
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    for _ in range(warmup):
        fn()
    ns = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter_ns()
        fn()
        sync()
        ns.append(time.perf_counter_ns() - t0)
    ns.sort()
    k = len(ns)
    return (ns[(k - 1) // 2] + ns[k // 2]) / 2 / 1e9
