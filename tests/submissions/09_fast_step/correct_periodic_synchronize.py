# solution: fast-step
# fails: 
# says: 
# Correct, written differently: a synchronize once every 1000 steps, where a GPU exists (to time a stretch):
# not one per step.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if i % 1000 == 999 and torch.cuda.is_available():
            torch.cuda.synchronize()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
