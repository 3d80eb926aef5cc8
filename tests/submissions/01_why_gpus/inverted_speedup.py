# solution: compare-devices
# fails: compare-devices-speedup
# says: inverted
# Typical mistake: the speed-up inverted (accelerator time / CPU time). Its crossover, computed consistently
# from those speed-ups, is accepted as consistent with them, so the one mistake costs the speed-up check only.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [g / c for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for n, s in reversed(list(zip(sizes, speedup))):
        if s <= 1:
            break
        crossover = n
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": crossover}
