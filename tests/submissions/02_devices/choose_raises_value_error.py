# solution: choose-device
# fails: choose-device-missing
# says: contract says RuntimeError
# Typical mistake: ValueError for a missing device; the contract (and torch) says RuntimeError.
def choose_device(requested=None):
    have = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    if torch.backends.mps.is_available():
        have.append(torch.device("mps"))
    have.append(torch.device("cpu"))
    if requested is None:
        return have[0]
    wanted = torch.device(requested)
    if wanted.type in ("cuda", "mps") and wanted.index is None and any(d.type == wanted.type for d in have):
        return wanted
    if wanted in have:
        return wanted
    raise ValueError(f"{wanted} is not available; this machine has {[str(d) for d in have]}")
