# solution: grad-accumulation
# fails: grad-accumulation-all-micro-batches grad-accumulation-scale
# says: zeroed after the step
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """A training loop's habit: step, then zero the gradients, so .grad is empty afterwards."""
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
    optimizer.step()
    optimizer.zero_grad()
