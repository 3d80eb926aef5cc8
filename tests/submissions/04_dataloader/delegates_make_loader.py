# solution: loader-for
# fails: loader-for-pin loader-for-workers loader-for-order
# says: write it yourself
from helpers.dataloader import make_loader


def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    return make_loader(dataset, device, batch_size=batch_size, num_workers=num_workers, seed=seed)
