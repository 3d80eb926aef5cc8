# solution: compare-devices
# fails:
# says:
# Correct, written differently: every input made first, then timed; numpy for the ratios; the crossover
# as the first size whose every later speed-up is above 1; the accelerator kept as given.
import numpy as np


def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = list(sizes)
    devices = ["cpu"] if accelerator is None else ["cpu", accelerator]
    works = {d if isinstance(d, str) else str(d): [make_work(n, d) for n in sizes] for d in devices}
    seconds = {d: [timer(w, d) for w in ws] for d, ws in works.items()}
    out = dict(accelerator=accelerator, sizes=sizes, cpu_s=seconds["cpu"], accelerator_s=None, speedup=None,
               crossover=None)
    if accelerator is None:
        return out
    acc_s = seconds[str(accelerator)]
    speedup = np.asarray(out["cpu_s"]) / np.asarray(acc_s)
    out.update(accelerator_s=acc_s, speedup=speedup.tolist())
    for i, n in enumerate(sizes):
        if np.all(speedup[i:] > 1):
            out["crossover"] = n
            break
    return out
