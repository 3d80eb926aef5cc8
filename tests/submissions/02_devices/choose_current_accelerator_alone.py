# solution: choose-device
# fails: choose-device-built-no-gpu
# says: built for
# Typical mistake: torch.accelerator.current_accelerator() without check_available=True names the
# accelerator torch was built for, so a CUDA wheel on a laptop without a GPU picks 'cuda'. Requests
# are handled correctly.
def choose_device(requested=None):
    if requested is None:
        acc = torch.accelerator.current_accelerator()
        return torch.device(acc.type) if acc is not None else torch.device("cpu")
    wanted = torch.device(requested)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if wanted.type == "cpu" or (wanted.type == "cuda" and count and (wanted.index or 0) < count) \
            or (wanted.type == "mps" and torch.backends.mps.is_available()):
        return wanted
    raise RuntimeError(f"no {wanted} on this machine; it has cpu" + (f" and {count} CUDA GPU(s)" if count else ""))
