# solution: move-batch
# fails:
# says:
# Correct, written differently: the course helper.
from helpers.device import to_device


def move_batch(batch, device):
    return to_device(batch, device)
