# solution: choose-device
# fails: choose-device-missing
# says: device_count
# Typical mistake: any cuda:N is accepted as soon as there is one GPU.
def choose_device(requested=None):
    if requested is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")
    wanted = torch.device(requested)
    ok = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not ok.get(wanted.type, False):
        raise RuntimeError(f"no {wanted} here; available: cpu" + (", cuda" if torch.cuda.is_available() else ""))
    return wanted
