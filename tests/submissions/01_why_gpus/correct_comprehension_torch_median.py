# solution: time-on-device
# fails:
# says:
# Correct, written differently: imports inside the function, a list comprehension over a nested helper,
# torch.cuda.synchronize(device) guarded by the device type, torch's median (the lower middle of an even count).
def time_on_device(fn, device, warmup=3, repeats=10):
    from time import perf_counter

    is_cuda = torch.device(device).type == "cuda"

    def once():
        if is_cuda:
            torch.cuda.synchronize(device)
        t0 = perf_counter()
        fn()
        if is_cuda:
            torch.cuda.synchronize(device)
        return perf_counter() - t0

    [fn() for _ in range(warmup)]
    times = [once() for _ in range(repeats)]
    return torch.tensor(times, dtype=torch.float64).median().item()
