# solution: loader-for
# fails: loader-for-pin
# says: MPS does not use pinned memory
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    # pins for every accelerator: but MPS has no pinned memory to gain from
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.device(device).type != "cpu", generator=torch.Generator().manual_seed(seed),
                      **extra)
