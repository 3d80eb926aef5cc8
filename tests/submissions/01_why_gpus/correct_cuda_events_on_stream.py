# solution: time-on-device
# fails:
# says:
# Correct, as chapter 01 teaches it: CUDA events recorded on the chosen GPU's stream, a host clock every other device.
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
            stream = torch.cuda.current_stream(device)  # the chosen GPU's queue, not the current GPU's
            start.record(stream)
            fn()
            end.record(stream)
            end.synchronize()  # wait until the GPU has reached the end mark
            times.append(start.elapsed_time(end) / 1000)  # elapsed_time is in milliseconds
        else:
            dev.synchronize(device)
            begin = time.perf_counter()
            fn()
            dev.synchronize(device)
            times.append(time.perf_counter() - begin)
    return statistics.median(times)
