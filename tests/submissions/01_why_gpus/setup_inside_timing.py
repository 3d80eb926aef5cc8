# solution: compare-devices
# fails: compare-devices-untimed-setup
# says: timed region
# Typical mistake: the inputs are created inside the timed function, so their creation (and, on a GPU,
# the copy to the device) is measured with the work.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    cpu_s = [timer(lambda n=n: make_work(n, "cpu")(), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(lambda n=n: make_work(n, accelerator)(), accelerator) for n in sizes]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for n, s in reversed(list(zip(sizes, speedup))):
        if s <= 1:
            break
        crossover = n
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": crossover}
