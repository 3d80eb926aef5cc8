# solution: move-batch
# fails: move-batch-flat move-batch-nested move-batch-types move-batch-new
# says: write it yourself
# Delegation: the course's own batch mover answers the exercise; calling it earns nothing here.
from helpers.device import to_device


def move_batch(batch, device):
    return to_device(batch, device)
