# solution: choose-device
# fails: choose-device-default choose-device-type choose-device-built-no-gpu choose-device-mps choose-device-request choose-device-missing
# says: write it yourself
# Delegation: the course's inventory of devices (CUDA GPUs, then MPS, then the CPU) does the work;
# only the lookup is the learner's own.
def choose_device(requested=None):
    have = dev.available_devices()
    if requested is None:
        return have[0]
    wanted = torch.device(requested)
    if wanted.type in ("cuda", "mps") and wanted.index is None and any(d.type == wanted.type for d in have):
        return wanted
    if wanted in have:
        return wanted
    raise RuntimeError(f"{wanted} is not available; this machine has {', '.join(map(str, have))}")
