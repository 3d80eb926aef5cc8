# solution: average-gradients
# fails:
# says:
def average_gradients(model):
    """ReduceOp.AVG (gloo has it in torch 2.13), asynchronous handles, and a new tensor assigned back."""
    ### BEGIN SOLUTION
    pending = []
    for p in model.parameters():
        if p.grad is None:
            continue
        t = p.grad.detach().clone()
        pending.append((p, t, dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)))
    for p, t, work in pending:
        work.wait()
        p.grad = t
    ### END SOLUTION
