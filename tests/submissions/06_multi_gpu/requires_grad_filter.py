# solution: average-gradients
# fails: average-gradients-ddp
# says: filter on p.requires_grad
# filters on requires_grad: the unused trainable parameter's grad None reaches all_reduce (issue 22)
def average_gradients(model):
    """After loss.backward() on every rank: each p.grad becomes its mean over all ranks, in place."""
    ### BEGIN SOLUTION
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.requires_grad:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world_size
    ### END SOLUTION
