# solution: choose-device
# fails: choose-device-request choose-device-missing
# says: choose_device(
# Typical mistake: the requested device is ignored; the automatic choice always wins.
def choose_device(requested=None):
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
