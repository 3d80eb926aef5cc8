# solution: choose-device
# fails: choose-device-type
# says: not the string
# Typical mistake: right devices, all returned as names ("cuda:0", "cpu"), for the automatic choice
# and for requests alike. It costs the one cell that checks the type; the others judge the device
# each name stands for.
def choose_device(requested=None):
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    have = [f"cuda:{i}" for i in range(n)] + (["mps"] if torch.backends.mps.is_available() else []) + ["cpu"]
    if requested is None:
        return have[0]
    name = str(requested)
    if name == "cuda" and n:
        return "cuda"
    if name not in have:
        raise RuntimeError(f"{name} is not available; this machine has {', '.join(have)}")
    return name
