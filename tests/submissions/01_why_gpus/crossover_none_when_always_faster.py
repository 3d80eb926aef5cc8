# solution: compare-devices
# fails: compare-devices-crossover
# says: crossover
# Typical mistake: the crossover is the size after the last loss, so it stays None when the accelerator
# wins at every size (it should then be the smallest size).
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for i in range(len(sizes) - 1, -1, -1):
        if speedup[i] <= 1:
            crossover = sizes[i + 1] if i + 1 < len(sizes) else None
            break
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": crossover}
