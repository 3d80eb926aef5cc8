# solution: grad-accumulation
# fails:
# says:
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Written differently: index slicing, zero on the first micro-batch, step on the last."""
    m = x.shape[0] // k
    for i in range(k):
        if i == 0:
            model.zero_grad(set_to_none=True)
        out = model(x[i * m:(i + 1) * m])
        loss = loss_fn(out, y[i * m:(i + 1) * m])
        (loss / k).backward()
        if i == k - 1:
            optimizer.step()
