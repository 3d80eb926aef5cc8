# solution: loader-for
# fails: 
# says: 
def loader_for(dataset, device, batch_size, num_workers, seed):
    """A shuffling DataLoader for batches bound for ``device``."""
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    options = dict(batch_size=batch_size, shuffle=True, num_workers=num_workers, pin_memory=kind == "cuda")
    if num_workers:
        options.update(persistent_workers=True, prefetch_factor=4)
    g = torch.Generator()
    g.manual_seed(seed)
    return DataLoader(dataset, generator=g, **options)
