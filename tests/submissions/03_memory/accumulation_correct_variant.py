# solution: grad-accumulation
# fails:
# says:
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Written differently: model.zero_grad, torch.split, each loss weighted by its share of the batch."""
    model.zero_grad()
    size = len(x) // k
    for xb, yb in zip(torch.split(x, size), torch.split(y, size)):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(x))
        loss.backward()
    optimizer.step()
