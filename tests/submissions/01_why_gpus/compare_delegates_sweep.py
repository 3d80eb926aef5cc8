# solution: compare-devices
# fails: compare-devices-speedup compare-devices-crossover compare-devices-untimed-setup compare-devices-no-accelerator
# says: write it yourself
# Delegates the whole comparison to the course's own sweep (bench.sweep), which also ignores the given timer.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    devices = ["cpu"] + ([accelerator] if accelerator is not None else [])
    table = bench.sweep(make_work, sizes, devices, progress=False)
    cpu_s = table.where(device="cpu").column("median")
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = table.where(device=str(torch.device(accelerator))).column("median")
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": bench.crossover(sizes, speedup)}
