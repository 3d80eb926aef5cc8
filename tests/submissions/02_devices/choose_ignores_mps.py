# solution: choose-device
# fails: choose-device-mps
# says: mps
# Typical mistake: only CUDA or CPU, so a Mac's GPU is never used.
def choose_device(requested=None):
    have = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    have.append(torch.device("cpu"))
    if requested is None:
        return have[0]
    wanted = torch.device(requested)
    if wanted.type == "cuda" and wanted.index is None and torch.cuda.is_available():
        return wanted
    if wanted in have:
        return wanted
    raise RuntimeError(f"{wanted} is not available; this machine has {have}")
