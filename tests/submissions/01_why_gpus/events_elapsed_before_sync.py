# solution: time-on-device
# fails: time-on-device-sync
# says: end.synchronize()
# Typical mistake: elapsed_time read right after end.record(), before the GPU has reached the end event.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            times.append(start.elapsed_time(end) / 1000)  # elapsed_time is in milliseconds
        else:
            dev.synchronize(device)
            begin = time.perf_counter()
            fn()
            dev.synchronize(device)
            times.append(time.perf_counter() - begin)
    return statistics.median(times)
