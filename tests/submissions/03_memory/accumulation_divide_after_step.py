# solution: grad-accumulation
# fails: grad-accumulation-step
# says: after the last micro-batch
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Divides the gradients by k after the step: the step used k times the gradient."""
    optimizer.zero_grad()
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        loss_fn(model(xb), yb).backward()
    optimizer.step()
    for p in model.parameters():
        p.grad /= k
