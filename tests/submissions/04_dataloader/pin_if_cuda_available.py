# solution: loader-for
# fails: loader-for-pin
# says: pin follows the batches' device
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    # the machine has a GPU, so pin: but the batches may be going to the CPU
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available(), generator=torch.Generator().manual_seed(seed), **extra)
