# solution: time-on-device
# fails: time-on-device-sync
# says: milliseconds returned as seconds
# Typical mistake: an event timer returns elapsed_time as it comes, in milliseconds, where seconds are asked for.
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
            end.synchronize()  # wait until the GPU has reached the end mark
            times.append(start.elapsed_time(end))
        else:
            dev.synchronize(device)
            begin = time.perf_counter()
            fn()
            dev.synchronize(device)
            times.append(time.perf_counter() - begin)
    return statistics.median(times)
