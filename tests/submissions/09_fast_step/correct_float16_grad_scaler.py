# solution: fast-step
# fails:
# says:
# Correct, written differently: chapter 05's float16 recipe, a GradScaler at its default scale (its first steps are skipped).
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    device_type = batches[0][0].device.type
    scaler = torch.amp.GradScaler(device_type)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
