# solution: fast-step
# fails: fast-step-results
# says: the loss of step 0
# Typical mistake: the batch's losses summed, not averaged (slow_step divides each sample's loss by len(x)).
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y, reduction="sum")
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
