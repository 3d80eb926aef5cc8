# solution: average-gradients
# fails: average-gradients-ddp
# says: every rank must divide
# only rank 0 divides: rank 1 keeps the sum (issue 22)
def average_gradients(model):
    """After loss.backward() on every rank: each p.grad becomes its mean over all ranks, in place."""
    ### BEGIN SOLUTION
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            if dist.get_rank() == 0:
                p.grad /= world_size
    ### END SOLUTION
