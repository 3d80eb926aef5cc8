# solution: loader-for
# fails: 
# says: 
from torch.utils.data import RandomSampler


def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    workers = int(num_workers)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=str(device).startswith("cuda"),
                      persistent_workers=workers > 0, prefetch_factor=(4 if workers > 0 else None))
