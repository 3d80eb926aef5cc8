# solution: choose-device
# fails:
# says:
# Correct, written differently: torch.accelerator for the automatic choice.
def choose_device(requested=None):
    if requested is None:
        if torch.accelerator.is_available():
            acc = torch.accelerator.current_accelerator()
            return torch.device(acc.type) if acc.type != "cuda" else torch.device("cuda", 0)
        return torch.device("cpu")
    d = torch.device(requested)
    ok = (d.type == "cpu"
          or (d.type == "cuda" and torch.cuda.is_available() and (d.index or 0) < torch.cuda.device_count())
          or (d.type == "mps" and torch.backends.mps.is_available()))
    if not ok:
        raise RuntimeError(f"no {d} on this machine; it has cpu" + (" and cuda" if torch.cuda.is_available() else ""))
    return d
