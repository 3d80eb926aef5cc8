# solution: compare-devices
# fails:
# says:
# Correct, written differently: the timer called by keyword with its own warm-up and repeats, a helper per
# device, the crossover by walking back from the largest size.
def compare_devices(make_work, sizes, accelerator, timer=time_on_device):
    def measure(device):
        out = []
        for size in sizes:
            work = make_work(size, device)
            out.append(timer(fn=work, device=device, warmup=2, repeats=5))
        return out

    answer = {"accelerator": accelerator, "sizes": [int(s) for s in sizes]}
    answer["cpu_s"] = measure(torch.device("cpu"))
    if not accelerator:
        answer.update(accelerator=None, accelerator_s=None, speedup=None, crossover=None)
        return answer
    answer["accelerator_s"] = measure(torch.device(accelerator))
    answer["speedup"] = [c / a for c, a in zip(answer["cpu_s"], answer["accelerator_s"])]
    i = len(sizes)
    while i > 0 and answer["speedup"][i - 1] > 1:
        i -= 1
    answer["crossover"] = sizes[i] if i < len(sizes) else None
    return answer
