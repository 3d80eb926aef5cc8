# solution: choose-device
# fails: choose-device-type
# says: not the string
# Typical mistake: the automatic choice returns a device name string instead of a torch.device.
def choose_device(requested=None):
    have = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    if torch.backends.mps.is_available():
        have.append(torch.device("mps"))
    have.append(torch.device("cpu"))
    if requested is None:
        return str(have[0].type)
    wanted = torch.device(requested)
    if (wanted.type == "cuda" and wanted.index is None and torch.cuda.is_available()) or wanted in have:
        return wanted
    raise RuntimeError(f"{wanted} is not available; this machine has {have}")
