# solution: grad-accumulation
# fails:
# says:
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Written differently: unscaled backward per micro-batch, the summed gradients divided by k before the step."""
    optimizer.zero_grad(set_to_none=False)
    for xb, yb in zip(torch.chunk(x, k), torch.chunk(y, k)):
        loss_fn(model(xb), yb).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad /= k
    optimizer.step()
