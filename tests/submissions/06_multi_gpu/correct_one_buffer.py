# solution: average-gradients
# fails:
# says:
def average_gradients(model):
    """One all-reduce for all gradients, as DDP's buckets do: flatten, reduce, copy back."""
    ### BEGIN SOLUTION
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    ### END SOLUTION
