# solution: average-gradients
# fails: average-gradients-ddp
# says: ReduceOp.AVG already divides
# ReduceOp.AVG and then a division: 1/world_size too small (issue 22)
def average_gradients(model):
    """After loss.backward() on every rank: each p.grad becomes its mean over all ranks, in place."""
    ### BEGIN SOLUTION
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
            p.grad /= world_size
    ### END SOLUTION
