# solution: time-on-device
# fails: time-on-device-runs
# says: torch.cuda.Event
# Typical mistake: CUDA events for every device; torch.cuda.Event() raises on a machine without a GPU.
import statistics


def time_on_device(fn, device, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)
