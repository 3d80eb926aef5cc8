# solution: fast-step
# fails: fast-step-results
# says: float16 autocast without a GradScaler
# Typical mistake: float16 autocast with no loss scaling (chapter 05: its small gradients underflow).
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(x.device.type, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
