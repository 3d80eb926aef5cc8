# solution: choose-device
# fails:
# says:
# Correct, written differently: cuda:<current_device()>, device_count() > 0 for "cuda" requests,
# getattr for builds of torch without torch.backends.mps.
def choose_device(requested=None):
    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    if requested is None:
        if torch.cuda.is_available():
            return torch.device(f"cuda:{torch.cuda.current_device()}")
        return torch.device("mps") if has_mps else torch.device("cpu")
    if isinstance(requested, str):
        requested = torch.device(requested)
    if requested.type == "cpu":
        return requested
    if requested.type == "cuda" and torch.cuda.device_count() > 0:
        if requested.index is None or requested.index < torch.cuda.device_count():
            return requested
    if requested.type == "mps" and has_mps:
        return requested
    options = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())] + (["mps"] if has_mps else [])
    raise RuntimeError(f"Requested {requested}, but available devices are {options}")
