# solution: grad-accumulation
# fails: grad-accumulation-all-micro-batches
# says: zeroed in every micro-batch
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Zeroes the gradients in every micro-batch: only the last one is left."""
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        optimizer.zero_grad()
        (loss_fn(model(xb), yb) / k).backward()
    optimizer.step()
