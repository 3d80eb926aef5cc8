# solution: grad-accumulation
# fails: grad-accumulation-all-micro-batches grad-accumulation-scale
# says: between the last backward() and the step
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Zeroes between the last backward and the step: the step applies nothing, .grad is empty."""
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
    optimizer.zero_grad(set_to_none=True)
    optimizer.step()
