# solution: fast-step
# fails:
# says:
# Correct, written differently: float32 (autocast is optional), a loss buffer on the batches' device, zero_grad after the step.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = torch.zeros(len(batches), device=batches[0][0].device)
    for i, (x, y) in enumerate(batches):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses[i] = loss.detach()
    return [float(v) for v in losses.tolist()]
