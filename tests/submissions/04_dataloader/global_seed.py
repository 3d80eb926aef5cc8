# solution: loader-for
# fails: loader-for-order
# says: not reproducible
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    torch.manual_seed(seed)  # seeds the global generator, which the loader draws from when it is iterated
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda", **extra)
