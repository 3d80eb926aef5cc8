# solution: grad-accumulation
# fails:
# says:
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Written differently: interleaved micro-batches x[i::k] (the mean is the same), p.grad = None to zero."""
    for p in model.parameters():
        p.grad = None
    for i in range(k):
        loss = loss_fn(model(x[i::k]), y[i::k])
        loss.div(k).backward()
    optimizer.step()
