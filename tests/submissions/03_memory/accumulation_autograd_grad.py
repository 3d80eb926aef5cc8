# solution: grad-accumulation
# fails:
# says:
def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    """Written differently: torch.autograd.grad per micro-batch, summed by hand into .grad."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for xb, yb in zip(x.split(len(x) // k), y.split(len(y) // k)):
        grads = torch.autograd.grad(loss_fn(model(xb), yb), params)
        for acc, g in zip(total, grads):
            acc.add_(g, alpha=1.0 / k)
    for p, g in zip(params, total):
        p.grad = g
    optimizer.step()
