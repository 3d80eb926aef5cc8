# solution: fast-step
# fails: fast-step-no-syncs
# says: inside the loop, in some steps only
# Typical mistake: the first loss printed in the first step only: the count does not grow with the steps, yet that step waits for the GPU.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for step, (x, y) in enumerate(batches):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step == 0:
            print(f"first loss: {loss.item():.4f}")
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
