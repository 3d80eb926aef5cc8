# solution: compare-devices
# fails:
# says:
# Correct, written differently: one loop over sizes, keyword arguments to the timer, the crossover by a forward scan.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    result = {"accelerator": None if accelerator is None else str(accelerator), "sizes": list(sizes),
              "cpu_s": [], "accelerator_s": None, "speedup": None, "crossover": None}
    if accelerator is not None:
        result["accelerator_s"], result["speedup"] = [], []
    for n in sizes:
        cpu_work = make_work(n, torch.device("cpu"))
        result["cpu_s"].append(timer(cpu_work, device="cpu"))
        if accelerator is not None:
            acc_work = make_work(n, accelerator)
            acc = timer(acc_work, device=accelerator)
            result["accelerator_s"].append(acc)
            result["speedup"].append(result["cpu_s"][-1] / acc)
            if result["speedup"][-1] > 1:
                if result["crossover"] is None:
                    result["crossover"] = n
            else:
                result["crossover"] = None
    return result
