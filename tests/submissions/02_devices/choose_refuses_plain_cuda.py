# solution: choose-device
# fails: choose-device-request
# says: 'cuda' names the current GPU
# Typical mistake: a request is looked up in the list of devices, where torch.device('cuda') is not
# equal to torch.device('cuda:0'), so the most common request of all, 'cuda', is refused.
def choose_device(requested=None):
    have = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    if torch.backends.mps.is_available():
        have.append(torch.device("mps"))
    have.append(torch.device("cpu"))
    if requested is None:
        return have[0]
    wanted = torch.device(requested)
    if wanted not in have:
        raise RuntimeError(f"{wanted} is not available; this machine has {', '.join(map(str, have))}")
    return wanted
