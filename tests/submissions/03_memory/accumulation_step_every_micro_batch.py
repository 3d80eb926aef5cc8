# solution: grad-accumulation
# fails: grad-accumulation-step
# says: step once
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Steps the optimizer after every micro-batch."""
    optimizer.zero_grad()
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
        optimizer.step()
