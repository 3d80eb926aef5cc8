# solution: compare-devices
# fails:
# says:
# Correct, written differently: the times kept in float64 tensors, the speed-up as a tensor, the
# crossover from the last size where the accelerator does not win.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)

    def times_on(device):
        fns = [make_work(n, device) for n in sizes]
        return torch.tensor([timer(f, device) for f in fns], dtype=torch.float64)

    cpu_s = times_on(torch.device("cpu"))
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s.tolist(), "accelerator_s": None,
                "speedup": None, "crossover": None}
    acc_s = times_on(torch.device(accelerator))
    speedup = cpu_s / acc_s
    losses = (speedup <= 1).nonzero().flatten().tolist()
    if not losses:
        crossover = sizes[0]
    elif losses[-1] + 1 < len(sizes):
        crossover = sizes[losses[-1] + 1]
    else:
        crossover = None
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s.tolist(), "accelerator_s": acc_s.tolist(),
            "speedup": speedup, "crossover": crossover}
