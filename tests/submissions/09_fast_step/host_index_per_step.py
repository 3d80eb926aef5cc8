# solution: fast-step
# fails: fast-step-no-syncs
# says: index made on the host
# Typical mistake: each batch shuffled with torch.randperm made on the host: indexing a device tensor with a host
# index copies the index to the device with a blocking copy, every step.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        order = torch.randperm(len(x))
        x, y = x[order], y[order]
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
