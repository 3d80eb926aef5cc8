# solution: compare-devices
# fails: compare-devices-no-accelerator
# says: no accelerator
# Typical mistake: assumes there is always an accelerator (torch.device(None) raises on a CPU-only machine).
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    accelerator = torch.device(accelerator)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for n, s in reversed(list(zip(sizes, speedup))):
        if s <= 1:
            break
        crossover = n
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": crossover}
