# solution: loader-for
# fails: loader-for-pin
# says: torch.device(device).type
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    # a string method: a torch.device has no startswith
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=device.startswith("cuda"), generator=torch.Generator().manual_seed(seed), **extra)
