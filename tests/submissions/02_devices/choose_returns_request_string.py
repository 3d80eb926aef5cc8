# solution: choose-device
# fails: choose-device-type
# says: torch.device(requested)
# Typical mistake: an accepted request is returned as it came, a string, not as a torch.device.
def choose_device(requested=None):
    if requested is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")
    kind = str(requested).split(":")[0]
    index = int(str(requested).split(":")[1]) if ":" in str(requested) else 0
    ok = {"cpu": True, "cuda": torch.cuda.is_available() and index < torch.cuda.device_count(),
          "mps": torch.backends.mps.is_available()}
    if not ok.get(kind, False):
        raise RuntimeError(f"no {requested} here; available: cpu")
    return requested
