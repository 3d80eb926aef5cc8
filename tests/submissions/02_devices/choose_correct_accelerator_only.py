# solution: choose-device
# fails:
# says:
# Correct, written differently: torch.accelerator only (any accelerator, not just CUDA and MPS),
# with check_available=True, a custom RuntimeError subclass, and the index from current_device_index().
class NoSuchDevice(RuntimeError):
    pass


def choose_device(requested=None):
    acc = torch.accelerator.current_accelerator(check_available=True)
    if requested is None:
        if acc is None:
            return torch.device("cpu")
        return torch.device(acc.type, torch.accelerator.current_device_index())
    want = torch.device(requested)
    if want.type == "cpu":
        return want
    if acc is not None and want.type == acc.type and (want.index is None or want.index < torch.accelerator.device_count()):
        return want
    have = ["cpu"] if acc is None else [f"{acc.type}:{i}" for i in range(torch.accelerator.device_count())] + ["cpu"]
    raise NoSuchDevice(f"there is no {want} on this machine (it has {', '.join(have)})")
