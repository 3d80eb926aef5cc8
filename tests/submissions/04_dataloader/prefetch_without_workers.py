# solution: loader-for
# fails: loader-for-workers
# says: prefetch_factor with 0 workers
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      persistent_workers=num_workers > 0, prefetch_factor=4,
                      pin_memory=torch.device(device).type == "cuda", generator=torch.Generator().manual_seed(seed))
