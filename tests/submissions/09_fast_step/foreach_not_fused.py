# solution: fast-step
# fails: fast-step-fused
# says: foreach=True is the multi-tensor loop
# Typical mistake: foreach=True taken for the fused optimizer.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
