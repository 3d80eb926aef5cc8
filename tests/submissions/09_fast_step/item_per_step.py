# solution: fast-step
# fails: fast-step-no-syncs
# says: in every step
# Typical mistake: the loss read with .item() in every step: right results, and a host sync per step on a GPU.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
