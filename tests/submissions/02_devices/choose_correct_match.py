# solution: choose-device
# fails:
# says:
# Correct, written differently: a dict of checks and str comparisons; "cuda" normalised to cuda:0.
def choose_device(requested=None):
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    available = {f"cuda:{i}" for i in range(n_gpus)} | {"cpu"}
    if torch.backends.mps.is_built() and torch.backends.mps.is_available():
        available.add("mps")
    if requested is None:
        for name in ("cuda:0", "mps", "cpu"):
            if name in available:
                return torch.device(name)
    name = str(requested)
    if name == "cuda":
        name = "cuda:0"
    if name not in available:
        raise RuntimeError("device %s not found. Available: %s" % (name, sorted(available)))
    return torch.device(name)
