# solution: fast-step
# fails: fast-step-batched
# says: a Python loop over the batch
# Typical mistake: the loop over the samples kept (only the syncs and the optimizer changed).
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        total = torch.zeros((), device=x.device)
        for i in range(len(x)):
            loss = F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]) / len(x)
            loss.backward()
            total = total + loss.detach()
        optimizer.step()
        losses.append(total)
    return torch.stack(losses).tolist()
