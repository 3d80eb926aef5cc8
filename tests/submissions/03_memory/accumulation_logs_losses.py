# solution: grad-accumulation
# fails:
# says:
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Written differently: keeps each micro-batch's loss tensor (after its backward, the graph is already freed)."""
    optimizer.zero_grad()
    losses = []
    for xb, yb in zip(x.tensor_split(k), y.tensor_split(k)):
        loss = loss_fn(model(xb), yb) / k
        loss.backward()
        losses.append(loss)
    optimizer.step()
    return torch.stack(losses).sum()
