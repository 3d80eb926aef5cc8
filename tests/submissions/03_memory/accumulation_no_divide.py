# solution: grad-accumulation
# fails: grad-accumulation-scale
# says: divide each micro-batch's loss by k
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Forgets to divide the loss by k: the gradient is k times too large."""
    optimizer.zero_grad()
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        loss_fn(model(xb), yb).backward()
    optimizer.step()
