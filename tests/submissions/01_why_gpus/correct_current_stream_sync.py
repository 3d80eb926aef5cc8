# solution: time-on-device
# fails:
# says:
# Correct, written differently: on a GPU it waits on the current stream (the queue the work went to), on the CPU for nothing.
import statistics
import time


def time_on_device(fn, device, warmup=3, repeats=10):
    device = torch.device(device)
    if device.type == "cuda":
        wait = torch.cuda.current_stream(device).synchronize
    else:
        wait = lambda: None  # noqa: E731 - the CPU's work is done when fn() returns
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        wait()
        start = time.perf_counter()
        fn()
        wait()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
