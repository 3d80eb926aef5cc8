# solution: choose-device
# fails: choose-device-built-no-gpu
# says: built for
# Typical mistake: torch.accelerator.current_accelerator() without check_available=True names the
# accelerator torch was built for, so a CUDA wheel on a laptop without a GPU picks 'cuda'.
def choose_device(requested=None):
    if requested is None:
        acc = torch.accelerator.current_accelerator()
        return torch.device(acc.type) if acc is not None else torch.device("cpu")
    return pick_device(requested)


from helpers.device import pick_device
