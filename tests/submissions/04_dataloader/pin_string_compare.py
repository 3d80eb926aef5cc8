# solution: loader-for
# fails: loader-for-pin
# says: CUDA device, any index
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=device == "cuda", generator=torch.Generator().manual_seed(seed), **extra)
