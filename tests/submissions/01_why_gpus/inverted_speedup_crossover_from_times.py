# solution: compare-devices
# fails: compare-devices-speedup
# says: inverted
# Typical mistake: the speed-up inverted (accelerator time / CPU time), with the crossover found right from the
# times themselves (the accelerator is faster where its time is smaller). The crossover is judged against the
# true speed-ups, so the one mistake costs the speed-up check only.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [g / c for c, g in zip(cpu_s, acc_s)]
    crossover = None
    for n, c, g in reversed(list(zip(sizes, cpu_s, acc_s))):
        if not g < c:
            break
        crossover = n
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": crossover}
