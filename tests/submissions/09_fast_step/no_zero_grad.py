# solution: fast-step
# fails: fast-step-results
# says: zero_grad
# Typical mistake: zero_grad dropped with the per-sample loop: gradients pile up from step to step.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
