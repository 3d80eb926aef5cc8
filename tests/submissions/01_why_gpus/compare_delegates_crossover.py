# solution: compare-devices
# fails: compare-devices-crossover
# says: write it yourself
# Times and divides by hand, but takes the crossover from the course (bench.crossover): that part earns nothing.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    cpu_s = [timer(make_work(n, "cpu"), "cpu") for n in sizes]
    if accelerator is None:
        return {"accelerator": None, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": None, "speedup": None,
                "crossover": None}
    acc_s = [timer(make_work(n, accelerator), accelerator) for n in sizes]
    speedup = [c / g for c, g in zip(cpu_s, acc_s)]
    return {"accelerator": accelerator, "sizes": sizes, "cpu_s": cpu_s, "accelerator_s": acc_s,
            "speedup": speedup, "crossover": bench.crossover(sizes, speedup)}
