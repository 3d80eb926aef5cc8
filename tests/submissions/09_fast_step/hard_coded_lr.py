# solution: fast-step
# fails: fast-step-results
# says: learning rate is 0.01, but the check called fast_step with lr=0.03
# Typical mistake: slow_step's default learning rate written in, the lr argument ignored.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
