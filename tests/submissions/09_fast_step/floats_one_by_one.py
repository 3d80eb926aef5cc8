# solution: fast-step
# fails: fast-step-no-syncs
# says: one read per step
# Typical mistake: the losses kept on the device, then read one by one after the loop: still a read per step.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return [loss.item() for loss in losses]
