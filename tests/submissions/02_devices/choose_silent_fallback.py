# solution: choose-device
# fails: choose-device-missing
# says: raise RuntimeError
# Typical mistake: a request for a missing device silently falls back to the CPU.
def choose_device(requested=None):
    if requested is not None:
        wanted = torch.device(requested)
        if wanted.type == "cuda" and torch.cuda.is_available() and (wanted.index or 0) < torch.cuda.device_count():
            return wanted
        if wanted.type == "mps" and torch.backends.mps.is_available():
            return wanted
        if wanted.type == "cpu":
            return wanted
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
