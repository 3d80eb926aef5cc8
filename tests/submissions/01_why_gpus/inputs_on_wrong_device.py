# solution: compare-devices
# fails: compare-devices-speedup compare-devices-untimed-setup
# says: wrong device
# Typical mistake: the accelerator timed on the inputs made for the CPU, so its "timings" measure the CPU.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    works = [make_work(n, "cpu") for n in sizes]
    cpu_s = [timer(w, "cpu") for w in works]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(w, accelerator) for w in works]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for n, s in reversed(list(zip(sizes, speedup))):
        if s <= 1:
            break
        crossover = n
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": crossover}
