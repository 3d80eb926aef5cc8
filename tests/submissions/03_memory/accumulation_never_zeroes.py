# solution: grad-accumulation
# fails: grad-accumulation-zero-first
# says: zero the gradients
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Never zeroes the gradients: what the previous step left in .grad is added to this one."""
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
    optimizer.step()
