# solution: grad-accumulation
# fails: grad-accumulation-memory
# says: one backward per micro-batch
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Runs every micro-batch's forward pass first, then the backward passes: all activations alive together."""
    optimizer.zero_grad()
    losses = [loss_fn(model(xb), yb) / k for xb, yb in zip(x.chunk(k), y.chunk(k))]
    for loss in losses:
        loss.backward()
    optimizer.step()
