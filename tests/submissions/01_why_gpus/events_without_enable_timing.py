# solution: time-on-device
# fails: time-on-device-sync
# says: enable_timing=True
# Typical mistake: events made without enable_timing=True, which cannot be timed (elapsed_time raises ValueError).
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start = torch.cuda.Event()
            end = torch.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()  # wait until the GPU has reached the end mark
            times.append(start.elapsed_time(end) / 1000)  # elapsed_time is in milliseconds
        else:
            dev.synchronize(device)
            begin = time.perf_counter()
            fn()
            dev.synchronize(device)
            times.append(time.perf_counter() - begin)
    return statistics.median(times)
