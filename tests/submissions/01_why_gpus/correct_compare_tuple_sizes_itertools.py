# solution: compare-devices
# fails:
# says:
# Correct, written differently: dict comprehensions keyed by size, itertools for the crossover, the
# no-accelerator answer built first and extended.
import itertools


def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    sizes = [*sizes]
    cpu = {n: timer(make_work(n, "cpu"), "cpu") for n in sizes}
    result = {"accelerator": None, "sizes": sizes, "cpu_s": [cpu[n] for n in sizes],
              "accelerator_s": None, "speedup": None, "crossover": None}
    if accelerator is not None:
        acc = {n: timer(make_work(n, accelerator), accelerator) for n in sizes}
        speed = {n: cpu[n] / acc[n] for n in sizes}
        losing = list(itertools.takewhile(lambda n: speed[n] > 1, reversed(sizes)))
        result.update(accelerator=torch.device(accelerator), accelerator_s=[acc[n] for n in sizes],
                      speedup=[speed[n] for n in sizes], crossover=losing[-1] if losing else None)
    return result
