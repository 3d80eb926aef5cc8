# solution: grad-accumulation
# fails: grad-accumulation-memory
# says: one backward
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Sums the micro-batch losses and calls backward once: every micro-batch's activations are alive together."""
    optimizer.zero_grad()
    total = sum(loss_fn(model(xb), yb) for xb, yb in zip(x.chunk(k), y.chunk(k))) / k
    total.backward()
    optimizer.step()
