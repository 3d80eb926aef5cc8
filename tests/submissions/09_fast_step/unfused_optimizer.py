# solution: fast-step
# fails: fast-step-fused
# says: not fused
# Typical mistake: the optimizer left as slow_step builds it (a Python loop over the parameters).
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=False)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
